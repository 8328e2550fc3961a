"""ShuffleNetV2-style units (Ma et al. 2018, torchvision's InvertedResidual):
a strided unit with two branches, then stride-1 units that split the channels
in half (chunk), run one half through 1x1 / depthwise 3x3 / 1x1 convs with
BatchNorm and ReLU, concatenate and shuffle the channels (view, transpose,
view)."""
import torch
import torch.nn as nn

batch_size = 64
image_size = 56
in_channels = 24
out_channels = 116
n_units = 3


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, c, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.stride = stride
        half = c_out // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in),
                nn.Conv2d(c_in, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True),
            )
        c_branch = c_in if stride > 1 else half
        self.branch2 = nn.Sequential(
            nn.Conv2d(c_branch, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False), nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, n_units: int):
        super().__init__()
        units = [ShuffleUnit(in_channels, out_channels, 2)] + [ShuffleUnit(out_channels, out_channels, 1) for _ in range(n_units - 1)]
        self.units = nn.Sequential(*units)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.units(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, out_channels, n_units]
