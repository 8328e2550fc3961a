"""GPT-2 small as a Hugging Face ``transformers`` user writes it (Radford et
al. 2019): ``GPT2LMHeadModel`` built from a ``GPT2Config`` with random
weights (12 layers, 768 wide, 12 heads, the tied 50257-token LM head), SDPA
attention (the library's default), no KV cache; forward returns the logits
of a batch of token ids."""
import torch
import torch.nn as nn
from transformers import GPT2Config, GPT2LMHeadModel

batch_size = 2
seq_len = 512
vocab_size = 50257
max_positions = 1024
n_embd = 768
n_layer = 12
n_head = 12


class Model(nn.Module):
    def __init__(self, vocab_size: int, max_positions: int, n_embd: int, n_layer: int, n_head: int):
        super().__init__()
        config = GPT2Config(vocab_size=vocab_size, n_positions=max_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                            bos_token_id=vocab_size - 1, eos_token_id=vocab_size - 1, use_cache=False, attn_implementation="sdpa")
        self.gpt2 = GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.gpt2(input_ids=input_ids, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len))]


def get_init_inputs():
    return [vocab_size, max_positions, n_embd, n_layer, n_head]
