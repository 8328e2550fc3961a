"""A ResNet-18-style image classifier (He et al. 2016, "Deep Residual Learning
for Image Recognition", the torchvision resnet18 layout): a 7x7 stride-2 stem
with BatchNorm, ReLU and max-pool, four stages of two basic blocks (64, 128,
256, 512 channels; the first block of stages 2-4 downsamples with a strided
3x3 conv and a 1x1 conv + BatchNorm shortcut), global average pool, a linear
classifier.  Eval mode, BatchNorm with non-trivial running statistics, so
folding BatchNorm into the convolutions changes real numbers."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 224
in_channels = 3
base_width = 64
num_classes = 1000


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = None
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.shortcut is None else self.shortcut(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + identity)


class Model(nn.Module):
    def __init__(self, in_channels: int, base_width: int, num_classes: int):
        super().__init__()
        w = base_width
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, w, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(inplace=False),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        widths = [w, 2 * w, 4 * w, 8 * w]
        blocks, c_in = [], w
        for i, c_out in enumerate(widths):
            blocks.append(BasicBlock(c_in, c_out, 1 if i == 0 else 2))
            blocks.append(BasicBlock(c_out, c_out, 1))
            c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c_in, num_classes)
        g = torch.Generator().manual_seed(0)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):  # non-trivial statistics
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x))
        return self.fc(torch.flatten(y.mean(dim=(2, 3)), 1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, base_width, num_classes]
