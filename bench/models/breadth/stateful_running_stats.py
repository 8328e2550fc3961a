"""A streaming feature normalizer that keeps its statistics in registered
buffers and updates them in place on every call (``running_mean.mul_().add_()``,
a call counter ``calls += 1``), the way online normalization and EMA
trackers are written, followed by a small MLP head.  LEGO carries the
state: the plan computes the new statistics and ModelNew writes them into
the same buffers in place, as eager does; the bench expects a verified plan."""
import torch
import torch.nn as nn

batch_size = 512
d_feature = 1024
d_hidden = 2048
momentum = 0.1


class Model(nn.Module):
    def __init__(self, d_feature: int, d_hidden: int, momentum: float):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("running_mean", torch.zeros(d_feature))
        self.register_buffer("running_var", torch.ones(d_feature))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.fc1 = nn.Linear(d_feature, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_feature)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, var = x.mean(0), x.var(0, unbiased=False)
        self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
        self.running_var.mul_(1 - self.momentum).add_(self.momentum * var)
        self.calls += 1
        normed = (x - self.running_mean) * torch.rsqrt(self.running_var + 1e-5)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(normed)))


def get_inputs():
    return [torch.randn(batch_size, d_feature)]


def get_init_inputs():
    return [d_feature, d_hidden, momentum]
