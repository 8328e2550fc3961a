"""MobileNetV3-Large as a ``torchvision`` user writes it (Howard et al.
2019): ``torchvision.models.mobilenet_v3_large(weights=None)``, random
weights, 1000 classes, eval mode (inverted residuals with depthwise convs,
squeeze-excitation with Hardsigmoid, Hardswish); forward returns the logits
of a batch of 224x224 images.  ``width_mult`` is torchvision's own
constructor argument (1.0; the tiny size narrows every layer with it)."""
import torch
import torch.nn as nn
import torchvision

batch_size = 16
image_size = 224
num_classes = 1000
width_mult = 1.0


class Model(nn.Module):
    def __init__(self, num_classes: int, width_mult: float):
        super().__init__()
        self.net = torchvision.models.mobilenet_v3_large(weights=None, num_classes=num_classes, width_mult=width_mult)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes, width_mult]
