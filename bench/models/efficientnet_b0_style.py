"""An EfficientNet-B0-style image classifier (Tan & Le 2019, "EfficientNet:
Rethinking Model Scaling for Convolutional Neural Networks", the torchvision
efficientnet_b0 layout): a 3x3 stride-2 stem to 32 channels with BatchNorm
and SiLU; sixteen MBConv blocks in the B0 stage table (expand ratio, kernel,
stride, channels, repeats: (1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40,
2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)),
each a 1x1 expansion (BatchNorm, SiLU; none at ratio 1), a depthwise kxk
conv (BatchNorm, SiLU), squeeze-excitation (global average pool, 1x1 conv to
a quarter of the block's input channels, SiLU, 1x1 conv back, sigmoid, a
channel-wise multiply), a 1x1 linear projection with BatchNorm, and a
residual add where stride is 1 and the widths match; a 1x1 head conv to
1280 channels (BatchNorm, SiLU), global average pool and a linear
classifier.  Eval mode (dropout and stochastic depth are identities there,
so they are left out) with non-trivial BatchNorm statistics: many small
memory-bound ops, depthwise convolutions and per-block reductions."""
import torch
import torch.nn as nn

batch_size = 8
image_size = 224
in_channels = 3
channel_divisor = 1  # divides every channel count (1: B0's widths; the tiny sizes shrink them)
max_repeats = 4  # caps each stage's repeats (4: B0's table as it is)
head_channels = 1280
num_classes = 1000

# expand ratio, kernel, first stride, output channels, repeats (B0)
STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]
STEM_CHANNELS = 32


def conv_bn_act(c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out)]
    if act:
        layers.append(nn.SiLU())
    return nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.mean(dim=(2, 3), keepdim=True)
        scale = torch.sigmoid(self.fc2(nn.functional.silu(self.fc1(scale))))
        return x * scale


class MBConv(nn.Module):
    def __init__(self, c_in: int, c_out: int, expand: int, kernel: int, stride: int):
        super().__init__()
        hidden = c_in * expand
        layers = [] if expand == 1 else [conv_bn_act(c_in, hidden, 1)]
        layers += [conv_bn_act(hidden, hidden, kernel, stride, groups=hidden), SqueezeExcitation(hidden, max(1, c_in // 4))]
        layers.append(conv_bn_act(hidden, c_out, 1, act=False))
        self.block = nn.Sequential(*layers)
        self.use_residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_residual else y


class Model(nn.Module):
    def __init__(self, in_channels: int, channel_divisor: int, max_repeats: int, head_channels: int, num_classes: int):
        super().__init__()

        def width(c: int) -> int:
            return max(4, c // channel_divisor)

        c = width(STEM_CHANNELS)
        self.stem = conv_bn_act(in_channels, c, 3, 2)
        blocks = []
        for expand, kernel, stride, channels, repeats in STAGES:
            for j in range(min(repeats, max_repeats)):
                blocks.append(MBConv(c, width(channels), expand, kernel, stride if j == 0 else 1))
                c = width(channels)
        self.blocks = nn.Sequential(*blocks)
        self.head = conv_bn_act(c, head_channels, 1)
        self.classifier = nn.Linear(head_channels, num_classes)
        g = torch.Generator().manual_seed(0)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):  # non-trivial statistics
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.head(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(y.mean(dim=(2, 3)), 1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, channel_divisor, max_repeats, head_channels, num_classes]
