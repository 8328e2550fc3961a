"""A GRU cell stepped over a sequence (Cho et al. 2014) with ``nn.GRUCell``,
as streaming models do: the hidden state is passed in, updated every step
from a Linear+LayerNorm input embedding, and the new state returned
(single-output forward: the state is the output)."""
import torch
import torch.nn as nn

batch_size = 256
seq_len = 32
d_input = 256
d_hidden = 512
d_out = 128  # width of the input embedding


class Model(nn.Module):
    def __init__(self, d_input: int, d_hidden: int, d_out: int):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(d_input, d_out), nn.LayerNorm(d_out))
        self.cell = nn.GRUCell(d_out, d_hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        e = self.embed(x)
        for t in range(x.shape[1]):
            h = self.cell(e[:, t], h)
        return h


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_input), torch.randn(batch_size, d_hidden)]


def get_init_inputs():
    return [d_input, d_hidden, d_out]
