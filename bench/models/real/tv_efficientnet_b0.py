"""EfficientNet-B0 as a ``torchvision`` user writes it (Tan and Le 2019):
``torchvision.models.efficientnet_b0(weights=None)``, random weights, 1000
classes, eval mode (MBConv blocks with SiLU and squeeze-excitation,
stochastic depth an identity in eval); forward returns the logits of a
batch of 224x224 images."""
import torch
import torch.nn as nn
import torchvision

batch_size = 16
image_size = 224
num_classes = 1000


class Model(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.net = torchvision.models.efficientnet_b0(weights=None, num_classes=num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes]
