"""ConvNeXt-T-style blocks (Liu et al. 2022, the official ``Block``): a 7x7
depthwise convolution, permute to channels-last, LayerNorm, a 4x inverted
MLP with GELU, layer scale (gamma), permute back and a residual add."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 56
dim = 96
n_blocks = 3


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(0.1 * torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.dwconv(x).permute(0, 2, 3, 1)
        x = self.gamma * self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        return shortcut + x.permute(0, 3, 1, 2)


class Model(nn.Module):
    def __init__(self, dim: int, n_blocks: int):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(n_blocks)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_inputs():
    return [torch.randn(batch_size, dim, image_size, image_size)]


def get_init_inputs():
    return [dim, n_blocks]
