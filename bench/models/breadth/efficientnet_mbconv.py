"""EfficientNet-B0-style MBConv blocks (Tan & Le 2019, torchvision's MBConv):
1x1 expansion (ratio 6), depthwise 5x5 conv, squeeze-and-excitation with SiLU
and a sigmoid gate, 1x1 projection, BatchNorm everywhere, SiLU activations
and a residual add where shapes match (stochastic depth off in eval)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
image_size = 28
channels = 80
expand_ratio = 6
n_blocks = 2


class SqueezeExcitation(nn.Module):
    def __init__(self, c: int, squeeze: int):
        super().__init__()
        self.fc1 = nn.Conv2d(c, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = F.adaptive_avg_pool2d(x, 1)
        scale = torch.sigmoid(self.fc2(F.silu(self.fc1(scale))))
        return x * scale


class MBConv(nn.Module):
    def __init__(self, c: int, expand_ratio: int):
        super().__init__()
        hidden = c * expand_ratio
        self.expand = nn.Sequential(nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.SiLU())
        self.depthwise = nn.Sequential(nn.Conv2d(hidden, hidden, 5, padding=2, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.SiLU())
        self.se = SqueezeExcitation(hidden, max(1, c // 4))
        self.project = nn.Sequential(nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.project(self.se(self.depthwise(self.expand(x))))


class Model(nn.Module):
    def __init__(self, channels: int, expand_ratio: int, n_blocks: int):
        super().__init__()
        self.blocks = nn.Sequential(*[MBConv(channels, expand_ratio) for _ in range(n_blocks)])
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_inputs():
    return [torch.randn(batch_size, channels, image_size, image_size)]


def get_init_inputs():
    return [channels, expand_ratio, n_blocks]
