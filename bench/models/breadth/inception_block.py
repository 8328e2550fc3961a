"""An Inception-v1 (GoogLeNet) module pair (Szegedy et al. 2015, torchvision's
Inception block, "3a" and "3b" widths): four parallel branches (1x1; 1x1 then
3x3; 1x1 then 3x3 in place of 5x5; 3x3 max-pool then 1x1), each conv with
BatchNorm and ReLU, concatenated on channels."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 28
in_channels = 192
scale = 1  # divides every branch width (tiny runs)


class BasicConv2d(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel_size: int, padding: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class Inception(nn.Module):
    def __init__(self, c_in: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int, pool_proj: int):
        super().__init__()
        self.branch1 = BasicConv2d(c_in, ch1x1, 1)
        self.branch2 = nn.Sequential(BasicConv2d(c_in, ch3x3red, 1), BasicConv2d(ch3x3red, ch3x3, 3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(c_in, ch5x5red, 1), BasicConv2d(ch5x5red, ch5x5, 3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True), BasicConv2d(c_in, pool_proj, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class Model(nn.Module):
    def __init__(self, in_channels: int, scale: int):
        super().__init__()
        s = scale
        self.inception3a = Inception(in_channels, 64 // s, 96 // s, 128 // s, 16 // s, 32 // s, 32 // s)
        c3a = 64 // s + 128 // s + 32 // s + 32 // s
        self.inception3b = Inception(c3a, 128 // s, 128 // s, 192 // s, 32 // s, 96 // s, 64 // s)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inception3b(self.inception3a(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, scale]
