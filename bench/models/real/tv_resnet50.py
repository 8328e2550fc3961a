"""ResNet-50 as a ``torchvision`` user writes it (He et al. 2016):
``torchvision.models.resnet50(weights=None)``, random weights, 1000
classes, eval mode; forward returns the logits of a batch of 224x224
images.  ``width_per_group`` is torchvision's own constructor argument
(64 for ResNet-50; the tiny size narrows the bottlenecks with it)."""
import torch
import torch.nn as nn
import torchvision

batch_size = 16
image_size = 224
num_classes = 1000
width_per_group = 64


class Model(nn.Module):
    def __init__(self, num_classes: int, width_per_group: int):
        super().__init__()
        self.net = torchvision.models.resnet50(weights=None, num_classes=num_classes, width_per_group=width_per_group)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes, width_per_group]
