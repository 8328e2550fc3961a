"""A streaming RNN cell that keeps its hidden state on the module, as a plain
tensor attribute reassigned on every call (``self.hidden = ...``), the way a
tutorial-style stateful cell is written.  LEGO refuses this forward with a
message naming ``self.hidden`` (its plan computes outputs and does not write
module state back); the bench expects that refusal."""
import torch
import torch.nn as nn

batch_size = 256
d_input = 256
d_hidden = 512


class Model(nn.Module):
    def __init__(self, batch_size: int, d_input: int, d_hidden: int):
        super().__init__()
        self.ih = nn.Linear(d_input, d_hidden)
        self.hh = nn.Linear(d_hidden, d_hidden)
        self.hidden = torch.zeros(batch_size, d_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.hidden = torch.tanh(self.ih(x) + self.hh(self.hidden.to(x.dtype)))  # .to: model.to(dtype) skips plain attributes
        return self.hidden


def get_inputs():
    return [torch.randn(batch_size, d_input)]


def get_init_inputs():
    return [batch_size, d_input, d_hidden]
