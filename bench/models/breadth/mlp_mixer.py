"""MLP-Mixer blocks (Tolstikhin et al. 2021, Mixer-B/16 widths): a patch
embedding (strided conv), then per block a token-mixing MLP applied across
patches (transpose, LayerNorm, two Linears with GELU) and a channel-mixing
MLP, both residual; a final LayerNorm, mean over tokens and a classifier."""
import torch
import torch.nn as nn

batch_size = 32
image_size = 224
patch_size = 16
dim = 768
d_token = 384
d_channel = 3072
n_blocks = 2
num_classes = 1000


class MixerBlock(nn.Module):
    def __init__(self, n_tokens: int, dim: int, d_token: int, d_channel: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(n_tokens, d_token), nn.GELU(), nn.Linear(d_token, n_tokens))
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(nn.Linear(dim, d_channel), nn.GELU(), nn.Linear(d_channel, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, image_size: int, patch_size: int, dim: int, d_token: int, d_channel: int, n_blocks: int, num_classes: int):
        super().__init__()
        n_tokens = (image_size // patch_size) ** 2
        self.stem = nn.Conv2d(3, dim, patch_size, stride=patch_size)
        self.blocks = nn.Sequential(*[MixerBlock(n_tokens, dim, d_token, d_channel) for _ in range(n_blocks)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(dim=1))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, patch_size, dim, d_token, d_channel, n_blocks, num_classes]
