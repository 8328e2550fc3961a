"""A streaming RNN cell that keeps its hidden state on the module, as a plain
tensor attribute reassigned on every call (``self.hidden = ...``), the way a
tutorial-style stateful cell is written.  LEGO carries the state: the plan
computes the new hidden state and ModelNew reassigns ``self.hidden`` as eager
does; the bench expects a verified plan.  The state keeps its dtype
(``.to(self.hidden.dtype)``: ``model.to(dtype)`` leaves a plain attribute in
float32), since a plan is specialised to one dtype of each tensor it reads."""
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
        h = torch.tanh(self.ih(x) + self.hh(self.hidden.to(x.dtype)))  # .to: model.to(dtype) skips plain attributes
        self.hidden = h.to(self.hidden.dtype)  # the state keeps one dtype from call to call
        return h


def get_inputs():
    return [torch.randn(batch_size, d_input)]


def get_init_inputs():
    return [batch_size, d_input, d_hidden]
