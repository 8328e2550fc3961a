"""Two Swin Transformer blocks (Liu et al. 2021): LayerNorm, window
partition, multi-head self-attention inside each window with a learned
relative position bias, window reverse, residual, LayerNorm and a GELU MLP;
the second block shifts the windows (torch.roll) and masks attention between
regions that the shift brought together."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
resolution = 56
dim = 96
n_heads = 3
window_size = 7


def window_partition(x: torch.Tensor, ws: int) -> torch.Tensor:
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws * ws, c)


def window_reverse(windows: torch.Tensor, ws: int, h: int, w: int) -> torch.Tensor:
    b = windows.shape[0] // ((h // ws) * (w // ws))
    x = windows.view(b, h // ws, w // ws, ws, ws, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(b, h, w, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, ws: int, n_heads: int):
        super().__init__()
        self.n_heads, self.scale = n_heads, (dim // n_heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, n_heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
        self.register_buffer("rel_index", rel[..., 0] * (2 * ws - 1) + rel[..., 1], persistent=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.n_heads, c // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.bias_table[self.rel_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(bw // nw, nw, self.n_heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.n_heads, n, n)
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(bw, n, c))


class SwinBlock(nn.Module):
    def __init__(self, dim: int, resolution: int, n_heads: int, ws: int, shift: int):
        super().__init__()
        self.resolution, self.ws, self.shift = resolution, ws, shift
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, ws, n_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        mask = None
        if shift:
            img = torch.zeros(1, resolution, resolution, 1)
            region = 0
            for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                    img[:, hs, wsl, :] = region
                    region += 1
            windows = window_partition(img, ws).squeeze(-1)
            mask = windows.unsqueeze(1) - windows.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        self.register_buffer("attn_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, c = x.shape
        h = w = self.resolution
        shortcut = x
        x = self.norm1(x).view(b, h, w, c)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        x = self.attn(window_partition(x, self.ws), self.attn_mask)
        x = window_reverse(x, self.ws, h, w)
        if self.shift:
            x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + x.reshape(b, length, c)
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, dim: int, resolution: int, n_heads: int, window_size: int):
        super().__init__()
        self.blocks = nn.Sequential(
            SwinBlock(dim, resolution, n_heads, window_size, 0),
            SwinBlock(dim, resolution, n_heads, window_size, window_size // 2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_inputs():
    return [torch.randn(batch_size, resolution * resolution, dim)]


def get_init_inputs():
    return [dim, resolution, n_heads, window_size]
