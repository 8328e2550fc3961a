"""Hugging Face ViT (transformers' ViTForImageClassification): images in, class logits out.

Built from a ViTConfig with random weights (no download): ``image_size``
square images of 3 channels cut into ``patch_size`` patches.  Tiny here for
the CPU tests; ``--set image_size=224 --set patch_size=16 --set n_layer=12
--set hidden=768 --set n_head=12 --set intermediate=3072 --set n_classes=1000``
is ViT-B/16.
"""
import torch
from torch import nn
from transformers import ViTConfig, ViTForImageClassification

batch_size = 2
image_size = 32
patch_size = 8
n_layer = 2
hidden = 64
n_head = 4
intermediate = 128
n_classes = 10
sdpa = True


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = ViTConfig(image_size=image_size, patch_size=patch_size, num_hidden_layers=n_layer, hidden_size=hidden,
                           num_attention_heads=n_head, intermediate_size=intermediate, num_labels=n_classes,
                           attn_implementation="sdpa" if sdpa else "eager")
        self.vit = ViTForImageClassification(config)

    def forward(self, pixel_values):
        return self.vit(pixel_values=pixel_values).logits


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return []
