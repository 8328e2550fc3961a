"""One decoding step of single-head attention over a rolling key/value cache
kept in registered buffers: each call projects the new token, shifts the
caches by one position (``torch.roll``, a new tensor stored in the buffer)
and writes the token's key and value into the last slot in place
(``cache[:, -1] = k``), counts the step in a long buffer, then attends over
the window.  The pattern of a streaming transformer decoder's KV cache.
LEGO carries the state (the plan computes the new caches and the counter;
ModelNew stores them as eager does); the bench expects a verified plan."""
import torch
import torch.nn as nn

batch_size = 64
window = 256
d_model = 512


class Model(nn.Module):
    def __init__(self, batch_size: int, window: int, d_model: int):
        super().__init__()
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.register_buffer("keys", torch.zeros(batch_size, window, d_model))
        self.register_buffer("values", torch.zeros(batch_size, window, d_model))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.scale = d_model ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.keys = torch.roll(self.keys, shifts=-1, dims=1)
        self.values = torch.roll(self.values, shifts=-1, dims=1)
        self.keys[:, -1] = self.k(x)
        self.values[:, -1] = self.v(x)
        self.steps += 1
        scores = torch.einsum("bd,bwd->bw", self.q(x), self.keys) * self.scale
        attended = torch.einsum("bw,bwd->bd", torch.softmax(scores, dim=-1), self.values)
        return x + self.out(attended)


def get_inputs():
    return [torch.randn(batch_size, d_model)]


def get_init_inputs():
    return [batch_size, window, d_model]
