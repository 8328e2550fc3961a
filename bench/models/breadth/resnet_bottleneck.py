"""A ResNet-50-style stage (He et al. 2016, torchvision's Bottleneck): three
bottleneck blocks (1x1 reduce, 3x3, 1x1 expand, each with BatchNorm; ReLU
after the residual add), the first one strided with a 1x1 conv + BatchNorm
projection shortcut.  Eval mode, BatchNorm with non-trivial running stats."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 56
in_channels = 256
width = 128
n_blocks = 3


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        c_out = width * self.expansion
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class Model(nn.Module):
    def __init__(self, in_channels: int, width: int, n_blocks: int):
        super().__init__()
        blocks = [Bottleneck(in_channels, width, stride=2)]
        blocks += [Bottleneck(width * 4, width, stride=1) for _ in range(n_blocks - 1)]
        self.blocks = nn.Sequential(*blocks)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                with torch.no_grad():
                    m.running_mean.uniform_(-0.1, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, width, n_blocks]
