"""A 12-layer pre-LayerNorm transformer encoder at GPT-2 "small" width
(Radford et al. 2019; Vaswani et al. 2017): learned position embeddings added
to the input, then per layer LayerNorm, one fused qkv projection split into
heads, attention written out as softmax(q k^T / sqrt(d_head)) v with two
batched matmuls (no mask: an encoder), an output projection and a residual
add; LayerNorm, an MLP (d_model -> d_mlp, exact GELU, d_mlp -> d_model) and a
residual add; a final LayerNorm.  Twelve identical layers: a dedupe that
solves each distinct sub-problem once does one layer's work, not twelve."""
import math

import torch
import torch.nn as nn

batch_size = 8
seq_len = 256
d_model = 768
n_heads = 12
d_mlp = 3072
n_layers = 12


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        d_head = c // self.n_heads
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d_head).permute(2, 0, 3, 1, 4).unbind(0)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_head)
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Layer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_mlp: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_mlp: int, n_layers: int, max_len: int):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.layers = nn.ModuleList(Layer(d_model, n_heads, d_mlp) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.pos[: x.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.ln_f(x)


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, n_heads, d_mlp, n_layers, seq_len]
