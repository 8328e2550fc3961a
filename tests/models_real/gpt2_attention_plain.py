"""GPT-2's attention block as plain torch, as transformers writes it: SDPA, then ``transpose(1, 2).contiguous().view(...)``.

No library import: the same op sequence as Hugging Face GPT-2's attention
(``F.scaled_dot_product_attention`` followed by ``.transpose(1, 2).contiguous()
.view(B, T, C)`` and the projection's ``.view(-1, C)``), which torch.export
captures but whose core-ATen decomposition fails ("Cannot view a tensor with
shape [2, 16, 64] and strides (64, 128, 1) as (32, 64)": the decomposed SDPA
gives other strides than the fused op's meta).  LEGO keeps SDPA whole
(``lego_core.load.decompose``).
"""
import torch
import torch.nn.functional as F
from torch import nn

batch_size = 2
seq_len = 16
d_model = 64
n_heads = 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, n_heads, c // n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y.view(-1, c)).view(b, t, c)


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return []
