"""One self-attention layer over a long sequence, attention written out by
hand: a fused qkv projection, scores = (Q K^T) * scale, softmax over the
keys, softmax @ V, an output projection and a residual add.

Memory (eager, bf16, file sizes): one score matrix is batch*heads*T*T =
1*9*16384*16384 elements * 2 bytes = 4608 MiB.  The peak holds two of them
at once (Q K^T and its scaled copy during the multiply, then the scaled
scores and the softmax during the softmax): 9216 MiB, plus the input x
(18 MiB), the qkv projection (54 MiB) and 2.5 MiB of weights: a computed
peak of about 9290 MiB = 9.07 GiB (9,740 MB in the bench's 1e6-byte MB).
In fp32 every figure doubles (about 18.1 GiB).  Unfused, that is what eager
needs; a flash-attention style kernel needs none of the score matrices."""
import torch
import torch.nn as nn

batch_size = 1
seq_len = 16384
n_heads = 9
head_dim = 64


class Model(nn.Module):
    def __init__(self, n_heads: int, head_dim: int):
        super().__init__()
        d_model = n_heads * head_dim
        self.n_heads, self.head_dim = n_heads, head_dim
        self.scale = head_dim ** -0.5
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(b, t, c)
        return x + self.proj(y)


def get_inputs():
    return [torch.randn(batch_size, seq_len, n_heads * head_dim)]


def get_init_inputs():
    return [n_heads, head_dim]
