"""A DenseNet-121-style dense block and transition (Huang et al. 2017,
torchvision's _DenseLayer): each layer is BN-ReLU-1x1 conv (bottleneck 4k)
then BN-ReLU-3x3 conv (growth k) and its output is concatenated onto all
earlier features; the transition is BN-ReLU-1x1 conv and a 2x2 avg-pool."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 56
in_channels = 64
growth_rate = 32
n_layers = 6


class DenseLayer(nn.Module):
    def __init__(self, c_in: int, growth: int):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(c_in)
        self.conv1 = nn.Conv2d(c_in, 4 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(torch.relu(self.norm1(x)))
        return self.conv2(torch.relu(self.norm2(x)))


class Model(nn.Module):
    def __init__(self, in_channels: int, growth_rate: int, n_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(in_channels + i * growth_rate, growth_rate) for i in range(n_layers))
        c = in_channels + n_layers * growth_rate
        self.transition = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2, 2))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return self.transition(torch.cat(features, 1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, growth_rate, n_layers]
