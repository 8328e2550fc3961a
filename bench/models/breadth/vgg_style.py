"""A VGG-11-style classifier (Simonyan & Zisserman 2014, configuration "A"):
stacks of 3x3 convolutions with ReLU, 2x2 max-pools between stages, then
an adaptive average pool and a three-layer MLP classifier (dropout, eval)."""
import torch
import torch.nn as nn

batch_size = 16
image_size = 224
in_channels = 3
base_width = 64
num_classes = 1000
d_classifier = 4096


class Model(nn.Module):
    def __init__(self, in_channels: int, base_width: int, num_classes: int, d_classifier: int):
        super().__init__()
        w = base_width
        cfg = [w, "M", 2 * w, "M", 4 * w, 4 * w, "M", 8 * w, 8 * w, "M", 8 * w, 8 * w, "M"]
        layers, c = [], in_channels
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(c * 7 * 7, d_classifier), nn.ReLU(inplace=True), nn.Dropout(),
            nn.Linear(d_classifier, d_classifier), nn.ReLU(inplace=True), nn.Dropout(),
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
    return [in_channels, base_width, num_classes, d_classifier]
