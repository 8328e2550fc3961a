"""A Mamba-2 SSD layer in its quadratic "naive" form (Dao & Gu 2024,
``ssd_minimal``'s ``segsum``): per-head scalar decay a_t = -exp(A_log) * dt_t,
cumulative sums of a over time (torch.cumsum), the decay matrix
L[t, s] = exp(cumsum_t - cumsum_s) masked to s <= t, and
y = (L * (C B^T)) x + D x; gated by SiLU(z), then an output projection."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 256
d_model = 512
n_heads = 8
d_state = 64


class Model(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_state: int):
        super().__init__()
        self.n_heads, self.d_state = n_heads, d_state
        d_inner = 2 * d_model
        self.head_dim = d_inner // n_heads
        self.norm = nn.RMSNorm(d_model)
        self.in_proj = nn.Linear(d_model, 2 * d_inner + 2 * d_state + n_heads, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.linspace(1.0, 16.0, n_heads)))
        self.dt_bias = nn.Parameter(torch.zeros(n_heads))
        self.D = nn.Parameter(torch.ones(n_heads))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, _ = x.shape
        d_inner = self.n_heads * self.head_dim
        z, u, B, C, dt = self.in_proj(self.norm(x)).split([d_inner, d_inner, self.d_state, self.d_state, self.n_heads], dim=-1)
        dt = F.softplus(dt + self.dt_bias)                                  # (b, l, h)
        a = (-torch.exp(self.A_log) * dt).transpose(1, 2)                  # (b, h, l)
        cum = torch.cumsum(a, dim=-1)
        segsum = cum.unsqueeze(-1) - cum.unsqueeze(-2)                     # (b, h, l, l): sum of a over (s, t]
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        decay = torch.exp(segsum.masked_fill(~causal, float("-inf")))
        scores = (C @ B.transpose(1, 2)).unsqueeze(1) * decay              # (b, h, l, l)
        u = u.view(b, length, self.n_heads, self.head_dim).transpose(1, 2)  # (b, h, l, p)
        y = scores @ (u * dt.transpose(1, 2).unsqueeze(-1)) + u * self.D.view(1, -1, 1, 1)
        y = y.transpose(1, 2).reshape(b, length, d_inner)
        return x + self.out_proj(y * F.silu(z))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, n_heads, d_state]
