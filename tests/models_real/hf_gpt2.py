"""Hugging Face GPT-2 (transformers' GPT2LMHeadModel) as a user wraps it: token ids in, logits out.

Built from a GPT2Config with random weights (no download); the sizes are
module-level constants, so ``--set`` scales it (tiny here for the CPU tests;
``--set n_layer=12 --set hidden=768 --set n_head=12 --set vocab_size=50257
--set seq_len=1024`` is GPT-2 small).  ``sdpa`` picks the attention
implementation: True is transformers' default (``torch.nn.functional.
scaled_dot_product_attention``), False its eager softmax(QK^T)V.  The
language-model head is tied to the token embedding (one Parameter under two
names, as in the released checkpoints).
"""
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

batch_size = 2
seq_len = 16
n_layer = 2
hidden = 64
n_head = 4
vocab_size = 128
sdpa = True


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(n_layer=n_layer, n_embd=hidden, n_head=n_head, vocab_size=vocab_size, n_positions=max(seq_len, 64),
                            bos_token_id=0, eos_token_id=0, attn_implementation="sdpa" if sdpa else "eager")
        self.gpt = GPT2LMHeadModel(config)

    def forward(self, input_ids):
        return self.gpt(input_ids=input_ids, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len))]


def get_init_inputs():
    return []
