"""A long-sequence self-attention layer written by hand: softmax(QK^T / sqrt(d)) V.

Its score matrix (batch x heads x seq x seq) dominates memory, as in a
16384-token layer on a GPU; tests run it on the CPU at a few hundred tokens."""
import torch
import torch.nn as nn

batch_size = 1
seq_len = 512
d_model = 64
n_heads = 2


class Model(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, n, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(x).reshape(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (d // h) ** -0.5
        probs = scores.softmax(dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(b, n, d)
        return self.proj(out)


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, n_heads]
