"""An LSTM cell written out by hand (Hochreiter & Schmidhuber 1997, the
PyTorch gate order i, f, g, o) and stepped over a sequence: one fused gate
GEMM per step, sigmoid/tanh gates, c = f*c + i*g, h = o*tanh(c).  The state
(h, c) is carried by the caller packed in one tensor of shape (2, batch,
hidden), passed in and returned, as streaming models exported for
deployment do (one tensor out; lstm_seq_tagger.py returns the nested tuple nn.LSTM does)."""
import torch
import torch.nn as nn

batch_size = 128
seq_len = 32
d_input = 256
d_hidden = 512


class LSTMCell(nn.Module):
    def __init__(self, d_input: int, d_hidden: int):
        super().__init__()
        self.ih = nn.Linear(d_input, 4 * d_hidden)
        self.hh = nn.Linear(d_hidden, 4 * d_hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class Model(nn.Module):
    def __init__(self, d_input: int, d_hidden: int):
        super().__init__()
        self.cell = LSTMCell(d_input, d_hidden)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        h, c = state.unbind(0)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], h, c)
        return torch.stack((h, c))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_input), torch.randn(2, batch_size, d_hidden)]


def get_init_inputs():
    return [d_input, d_hidden]
