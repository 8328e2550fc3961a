"""Hugging Face Llama (transformers' LlamaForCausalLM) with grouped-query attention: token ids in, logits out.

Built from a LlamaConfig with random weights (no download); ``n_kv_head`` <
``n_head`` makes the attention grouped-query (GQA: each key/value head serves
``n_head // n_kv_head`` query heads).  Tiny here for the CPU tests; ``--set
n_layer=4 --set hidden=2048 --set n_head=32 --set n_kv_head=8 --set
intermediate=8192 --set vocab_size=32000 --set seq_len=1024`` is a Llama-1B-like
stack.  ``sdpa``: transformers' default attention (True) or its eager one.
"""
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

batch_size = 2
seq_len = 16
n_layer = 2
hidden = 64
n_head = 4
n_kv_head = 2
intermediate = 128
vocab_size = 128
sdpa = True


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                             num_key_value_heads=n_kv_head, intermediate_size=intermediate, vocab_size=vocab_size,
                             max_position_embeddings=max(seq_len, 64), bos_token_id=0, eos_token_id=0, pad_token_id=0,
                             attn_implementation="sdpa" if sdpa else "eager")
        self.llama = LlamaForCausalLM(config)

    def forward(self, input_ids):
        return self.llama(input_ids=input_ids, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len))]


def get_init_inputs():
    return []
