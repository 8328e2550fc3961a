"""An Elman RNN (vanilla tanh RNN) written out as people write it by hand:
the input projection of every step at once, then a Python loop over time of
h = tanh(x_t W_ih + h W_hh + b).  The state is passed in and the new state
returned (h = rnn(x, h)), as a streaming encoder is called chunk after
chunk; LEGO optimizes single-output forwards, so the state is the output."""
import torch
import torch.nn as nn

batch_size = 256
seq_len = 32
d_input = 256
d_hidden = 512


class Model(nn.Module):
    def __init__(self, d_input: int, d_hidden: int):
        super().__init__()
        self.ih = nn.Linear(d_input, d_hidden)
        self.hh = nn.Linear(d_hidden, d_hidden, bias=False)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        xs = self.ih(x)
        for t in range(x.shape[1]):
            h = torch.tanh(xs[:, t] + self.hh(h))
        return h


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_input), torch.randn(batch_size, d_hidden)]


def get_init_inputs():
    return [d_input, d_hidden]
