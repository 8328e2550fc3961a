"""An AlexNet-style classifier (Krizhevsky et al. 2012, the torchvision
layout): an 11x11 stride-4 convolution, 5x5 and 3x3 convolutions with ReLU,
overlapping 3x3 stride-2 max-pools, local response normalization after the
first two convolutions (as in the paper), and a dropout MLP head (eval)."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 224
in_channels = 3
width = 64
num_classes = 1000
d_classifier = 4096


class Model(nn.Module):
    def __init__(self, in_channels: int, width: int, num_classes: int, d_classifier: int):
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, w, 11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0), nn.MaxPool2d(3, 2),
            nn.Conv2d(w, 3 * w, 5, padding=2), nn.ReLU(inplace=True),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0), nn.MaxPool2d(3, 2),
            nn.Conv2d(3 * w, 6 * w, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(6 * w, 4 * w, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(4 * w, 4 * w, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(4 * w * 6 * 6, d_classifier), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(d_classifier, d_classifier), nn.ReLU(inplace=True),
            nn.Linear(d_classifier, num_classes),
        )
        for m in self.modules():  # He initialisation (fan-in, so depthwise convs too): a signal that survives the depth
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, width, num_classes, d_classifier]
