"""A Llama-3.2-1B-like decoder as a Hugging Face ``transformers`` user writes
it (Grattafiori et al. 2024): ``LlamaModel`` built from a ``LlamaConfig``
with random weights, hidden 2048, 32 query heads sharing 8 key/value heads
(grouped-query attention), SwiGLU intermediate 8192, RMSNorm, rotary
embeddings, SDPA attention (the library's default), no KV cache; only the
first few layers (``n_layers``), and forward returns the last hidden state
of a batch of token ids (the features a user feeds to their own head)."""
import torch
import torch.nn as nn
from transformers import LlamaConfig, LlamaModel

batch_size = 2
seq_len = 512
vocab_size = 128256
hidden_size = 2048
intermediate_size = 8192
n_layers = 4
n_heads = 32
n_kv_heads = 8
max_positions = 2048


class Model(nn.Module):
    def __init__(self, vocab_size: int, hidden_size: int, intermediate_size: int, n_layers: int, n_heads: int, n_kv_heads: int,
                 max_positions: int):
        super().__init__()
        config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
                             num_hidden_layers=n_layers, num_attention_heads=n_heads, num_key_value_heads=n_kv_heads,
                             max_position_embeddings=max_positions, rope_theta=500000.0, use_cache=False,
                             attn_implementation="sdpa")
        self.llama = LlamaModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.llama(input_ids=input_ids, use_cache=False).last_hidden_state


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, seq_len))]


def get_init_inputs():
    return [vocab_size, hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads, max_positions]
