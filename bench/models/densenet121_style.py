"""A DenseNet-121-style image classifier (Huang et al. 2017, "Densely Connected
Convolutional Networks", the torchvision densenet121 layout): a 7x7 stride-2
stem with BatchNorm, ReLU and max-pool; four dense blocks of [6, 12, 24, 16]
layers, each layer BatchNorm-ReLU-conv1x1 (to ``bn_size * growth_rate``
channels) then BatchNorm-ReLU-conv3x3 (``growth_rate`` new channels) over the
``torch.cat`` of every earlier feature map of its block; transitions between
blocks (BatchNorm-ReLU-conv1x1 halving the channels, 2x2 average pool); a
final BatchNorm and ReLU, global average pool and a linear classifier.  120
convolutions, 62 concatenations of growing width and 121 BatchNorms, most
in front of their convolutions (pre-activation: they cannot be folded into
the convolution before them).  Eval mode with non-trivial BatchNorm
statistics."""
import torch
import torch.nn as nn

batch_size = 8
image_size = 224
in_channels = 3
growth_rate = 32
bn_size = 4
init_features = 64
blocks1 = 6
blocks2 = 12
blocks3 = 24
blocks4 = 16
num_classes = 1000


class DenseLayer(nn.Module):
    def __init__(self, c_in: int, growth_rate: int, bn_size: int):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(c_in)
        self.conv1 = nn.Conv2d(c_in, bn_size * growth_rate, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, 3, padding=1, bias=False)

    def forward(self, features: list) -> torch.Tensor:
        x = torch.cat(features, 1)
        y = self.conv1(torch.relu(self.norm1(x)))
        return self.conv2(torch.relu(self.norm2(y)))


class DenseBlock(nn.Module):
    def __init__(self, n_layers: int, c_in: int, growth_rate: int, bn_size: int):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(c_in + i * growth_rate, growth_rate, bn_size) for i in range(n_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(c_in)
        self.conv = nn.Conv2d(c_in, c_out, 1, bias=False)
        self.pool = nn.AvgPool2d(2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(torch.relu(self.norm(x))))


class Model(nn.Module):
    def __init__(self, in_channels: int, growth_rate: int, bn_size: int, init_features: int, blocks: list, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, init_features, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(init_features),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, c = [], init_features
        for i, n in enumerate(blocks):
            stages.append(DenseBlock(n, c, growth_rate, bn_size))
            c += n * growth_rate
            if i < len(blocks) - 1:
                stages.append(Transition(c, c // 2))
                c //= 2
        self.features = nn.Sequential(*stages)
        self.norm = nn.BatchNorm2d(c)
        self.classifier = nn.Linear(c, num_classes)
        g = torch.Generator().manual_seed(0)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):  # non-trivial statistics
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.data.copy_(torch.rand(m.num_features, generator=g) - 0.5)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm(self.features(self.stem(x))))
        return self.classifier(torch.flatten(y.mean(dim=(2, 3)), 1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, growth_rate, bn_size, init_features, [blocks1, blocks2, blocks3, blocks4], num_classes]
