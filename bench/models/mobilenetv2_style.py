"""A MobileNetV2-style classifier (Sandler et al. 2018, "MobileNetV2: Inverted
Residuals and Linear Bottlenecks", the torchvision layout at width 1.0):
a 3x3 stride-2 stem, seventeen inverted residual blocks (1x1 expand, 3x3
depthwise, 1x1 linear projection, each conv followed by BatchNorm, ReLU6
after the first two, a residual add when stride is 1 and widths match), a
1x1 conv to 1280 channels, global average pool and a linear classifier.
Eval mode with non-trivial BatchNorm statistics: many small memory-bound
ops around cheap convolutions."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 224
in_channels = 3
width_scale = 1  # multiplies every channel count after the stem (1: torchvision's width 1.0)
last_channels = 1280
num_classes = 1000

# expansion t, output channels c, repeats n, first stride s (the paper's Table 2)
SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def conv_bn(c_in: int, c_out: int, kernel: int, stride: int, groups: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out)]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, expand: int):
        super().__init__()
        hidden = c_in * expand
        layers = [] if expand == 1 else [conv_bn(c_in, hidden, 1, 1)]
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), conv_bn(hidden, c_out, 1, 1, act=False)]
        self.body = nn.Sequential(*layers)
        self.use_residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.use_residual else y


class Model(nn.Module):
    def __init__(self, in_channels: int, width_scale: int, last_channels: int, num_classes: int):
        super().__init__()
        c_in = 32
        blocks = [conv_bn(in_channels, c_in, 3, 2)]
        for t, c, n, s in SETTINGS:
            c_out = c * width_scale
            for i in range(n):
                blocks.append(InvertedResidual(c_in, c_out, s if i == 0 else 1, t))
                c_in = c_out
        blocks.append(conv_bn(c_in, last_channels, 1, 1))
        self.features = nn.Sequential(*blocks)
        self.classifier = nn.Linear(last_channels, num_classes)
        g = torch.Generator().manual_seed(0)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):  # non-trivial statistics
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.features(x)
        return self.classifier(y.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, width_scale, last_channels, num_classes]
