"""MobileNetV3-small as a ``torchvision`` user writes it:
``torchvision.models.mobilenet_v3_small(weights=None)``, random weights (Hardswish, squeeze-excitation
with Hardsigmoid, depthwise convolutions); forward returns the logits of a batch of images.  The
test suite runs it on the GPU machine (torchvision needs a CUDA build of torch there)."""
import torch
import torch.nn as nn
import torchvision

batch_size = 2
image_size = 32
num_classes = 10


class Model(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.net = torchvision.models.mobilenet_v3_small(weights=None, num_classes=num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes]
