"""A Mamba block (Gu & Dao 2023, the reference ``selective_scan_ref``): input
projection to x and a gate z, causal depthwise conv1d and SiLU, input-dependent
dt, B, C (softplus on dt), discretised A = -exp(A_log), and the selective scan
written as the sequential loop over time h = exp(dt A) h + dt B x, y = C h;
D skip, SiLU gate, output projection, RMS-style residual norm."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 64
d_model = 512
d_state = 16
d_conv = 4
expand = 2


class Model(nn.Module):
    def __init__(self, d_model: int, d_state: int, d_conv: int, expand: int):
        super().__init__()
        d_inner = expand * d_model
        self.dt_rank = math.ceil(d_model / 16)
        self.norm = nn.LayerNorm(d_model)
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, d_inner)
        a = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
        self.A_log = nn.Parameter(torch.log(a))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        self.d_state = d_state

    def selective_scan(self, u, delta, A, B, C):
        # u, delta: (b, l, d); A: (d, n); B, C: (b, l, n)
        dA = torch.exp(delta.unsqueeze(-1) * A)
        dBu = delta.unsqueeze(-1) * B.unsqueeze(2) * u.unsqueeze(-1)
        h = torch.zeros_like(dA[:, 0])
        ys = []
        for t in range(u.shape[1]):
            h = dA[:, t] * h + dBu[:, t]
            ys.append((h * C[:, t].unsqueeze(1)).sum(-1))
        return torch.stack(ys, dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        xz = self.in_proj(self.norm(x))
        u, z = xz.chunk(2, dim=-1)
        u = F.silu(self.conv1d(u.transpose(1, 2))[..., :length].transpose(1, 2))
        dt, B, C = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))
        y = self.selective_scan(u, delta, -torch.exp(self.A_log), B, C) + u * self.D
        return x + self.out_proj(y * F.silu(z))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, d_state, d_conv, expand]
