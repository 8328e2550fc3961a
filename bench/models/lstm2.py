"""A sequence regressor: a two-layer LSTM over feature vectors, LayerNorm on
every step's hidden state and a two-layer MLP head (GELU) per step.

The recurrent core stays a library call (cuDNN); what an optimizer can win is
around it (the LayerNorm and the head's epilogues), and it must not lose on
the per-call overhead of a plan made mostly of library calls."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
seq_len = 256
d_input = 512
d_hidden = 1024
d_head = 512
d_out = 128


class Model(nn.Module):
    def __init__(self, d_input: int, d_hidden: int, d_head: int, d_out: int):
        super().__init__()
        self.lstm = nn.LSTM(d_input, d_hidden, num_layers=2, batch_first=True)
        self.norm = nn.LayerNorm(d_hidden)
        self.fc1 = nn.Linear(d_hidden, d_head)
        self.fc2 = nn.Linear(d_head, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(x)
        return self.fc2(F.gelu(self.fc1(self.norm(h))))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_input)]


def get_init_inputs():
    return [d_input, d_hidden, d_head, d_out]
