"""A ResNet-101-style image classifier (He et al. 2016, "Deep Residual Learning
for Image Recognition", the torchvision resnet101 layout): a 7x7 stride-2 stem
with BatchNorm, ReLU and max-pool, four stages of bottleneck blocks ([3, 4,
23, 3]: 1x1 reduce, 3x3, 1x1 expand by 4, each conv followed by BatchNorm,
ReLU after the first two and after the residual add; widths 64..512 inside,
256..2048 out; the first block of each stage has a 1x1 conv + BatchNorm
shortcut, strided from stage 2 on, the stride on the 3x3 conv as in
torchvision's "ResNet v1.5"), global average pool, a linear classifier.
104 convolutions and 33 residual adds: a graph of some two hundred
sub-problems, many of them repeats of the same signature.  Eval mode,
BatchNorm with non-trivial running statistics, so folding BatchNorm into the
convolutions changes real numbers; the last BatchNorm of each residual
branch has a small scale (as zero-init-residual training leaves it), so 33
residual adds keep activations of order one in bf16."""
import torch
import torch.nn as nn

batch_size = 8
image_size = 224
in_channels = 3
base_width = 64  # the stem's width and stage 1's inner width (torchvision: 64)
blocks1 = 3
blocks2 = 4
blocks3 = 23
blocks4 = 3
num_classes = 1000

EXPANSION = 4


class Bottleneck(nn.Module):
    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        c_out = width * EXPANSION
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + identity)


class Model(nn.Module):
    def __init__(self, in_channels: int, base_width: int, blocks: list, num_classes: int):
        super().__init__()
        w = base_width
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, w, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, c_in = [], w
        for i, n in enumerate(blocks):
            width = w * 2**i
            layers = []
            for j in range(n):
                layers.append(Bottleneck(c_in, width, 2 if i > 0 and j == 0 else 1))
                c_in = width * EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(c_in, num_classes)
        g = torch.Generator().manual_seed(0)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):  # non-trivial statistics
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
        for m in self.modules():
            if isinstance(m, Bottleneck):  # a residual branch adds a little to the running sum
                m.bn3.weight.data.mul_(0.2)
                m.bn3.bias.data.mul_(0.2)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = self.layer4(self.layer3(self.layer2(self.layer1(y))))
        return self.fc(torch.flatten(y.mean(dim=(2, 3)), 1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, base_width, [blocks1, blocks2, blocks3, blocks4], num_classes]
