"""ViT-B/16 as a Hugging Face ``transformers`` user writes it (Dosovitskiy et
al. 2021): ``ViTForImageClassification`` built from a ``ViTConfig`` with
random weights (16x16 patches of a 224x224 image, 12 layers, 768 wide, 12
heads, intermediate 3072, a 1000-class head on the CLS token), SDPA
attention (the library's default); forward returns the logits of a batch
of images."""
import torch
import torch.nn as nn
from transformers import ViTConfig, ViTForImageClassification

batch_size = 8
image_size = 224
patch_size = 16
hidden_size = 768
n_layers = 12
n_heads = 12
intermediate_size = 3072
num_classes = 1000


class Model(nn.Module):
    def __init__(self, image_size: int, patch_size: int, hidden_size: int, n_layers: int, n_heads: int, intermediate_size: int,
                 num_classes: int):
        super().__init__()
        config = ViTConfig(image_size=image_size, patch_size=patch_size, hidden_size=hidden_size, num_hidden_layers=n_layers,
                           num_attention_heads=n_heads, intermediate_size=intermediate_size, num_labels=num_classes,
                           attn_implementation="sdpa")
        self.vit = ViTForImageClassification(config)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.vit(pixel_values=pixel_values).logits


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch_size, hidden_size, n_layers, n_heads, intermediate_size, num_classes]
