"""MobileNetV1-style depthwise-separable stack (Howard et al. 2017): a strided
3x3 stem, then blocks of a 3x3 depthwise convolution and a 1x1 pointwise
convolution, each with BatchNorm and ReLU6, some strided; global pool and a
linear classifier."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 224
in_channels = 3
base_width = 32
num_classes = 1000


def conv_bn(c_in: int, c_out: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU6(inplace=True))


def conv_dw(c_in: int, c_out: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in), nn.ReLU6(inplace=True),
        nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU6(inplace=True),
    )


class Model(nn.Module):
    def __init__(self, in_channels: int, base_width: int, num_classes: int):
        super().__init__()
        w = base_width
        plan = [(w, 2 * w, 1), (2 * w, 4 * w, 2), (4 * w, 4 * w, 1), (4 * w, 8 * w, 2), (8 * w, 8 * w, 1),
                (8 * w, 16 * w, 2), (16 * w, 16 * w, 1), (16 * w, 16 * w, 1), (16 * w, 32 * w, 2)]
        self.features = nn.Sequential(conv_bn(in_channels, w, 2), *[conv_dw(a, b, s) for a, b, s in plan])
        self.fc = nn.Linear(32 * w, num_classes)
        for m in self.modules():  # He initialisation (fan-in, so depthwise convs too): a signal that survives the depth
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = x.mean(dim=(2, 3))
        return self.fc(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, base_width, num_classes]
