"""ConvNeXt-T as a ``timm`` user writes it (Liu et al. 2022):
``timm.create_model("convnext_tiny", pretrained=False)``, random weights,
1000 classes, eval mode (depthwise 7x7 convs, LayerNorm over channels,
Linear MLP with GELU, layer scale); forward returns the logits of a batch
of 224x224 images."""
import timm
import torch
import torch.nn as nn

batch_size = 16
image_size = 224
num_classes = 1000


class Model(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.net = timm.create_model("convnext_tiny", pretrained=False, num_classes=num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes]
