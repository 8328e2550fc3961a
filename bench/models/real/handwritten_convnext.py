"""A hand-written ConvNeXt laid out as ``timm.create_model("convnext_tiny")``
is (Liu et al. 2022), for machines where timm cannot be imported: the same
module types and forward code shapes (a 4x4 stride-4 ``stem`` conv with a
``LayerNorm2d`` (permute to channels-last, ``F.layer_norm``, permute back);
four ``stages``, each after the first opening with a LayerNorm2d + 2x2
stride-2 conv ``downsample``, of ``ConvNeXtBlock``s: depthwise 7x7
``conv_dw``, ``x.permute(0, 2, 3, 1)``, ``nn.LayerNorm`` over channels, an
``Mlp`` (Linear ``fc1``, GELU, Linear ``fc2``), ``permute(0, 3, 1, 2)``,
layer scale ``x.mul(gamma.reshape(1, -1, 1, 1))``, ``drop_path`` (an
identity in eval) plus the shortcut; a head of global average pool,
LayerNorm2d, flatten and Linear ``fc``), timm's initialisation (truncated
normal, std 0.02) and random weights, eval mode.  ConvNeXt-T is ``dim``
96 with ``depth_1``-``depth_4`` 3, 3, 9, 3; ``layer_scale_init`` is timm's
1e-6."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
image_size = 224
num_classes = 1000
dim = 96
depth_1 = 3
depth_2 = 3
depth_3 = 9
depth_4 = 3
layer_scale_init = 1e-6


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Mlp(nn.Module):
    def __init__(self, features: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(0.0)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden, features)
        self.drop2 = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


class ConvNeXtBlock(nn.Module):
    def __init__(self, channels: int, layer_scale_init: float, mlp_ratio: int = 4):
        super().__init__()
        self.conv_dw = nn.Conv2d(channels, channels, kernel_size=7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels, eps=1e-6)
        self.mlp = Mlp(channels, mlp_ratio * channels)
        self.gamma = nn.Parameter(layer_scale_init * torch.ones(channels))
        self.shortcut = nn.Identity()
        self.drop_path = nn.Identity()  # stochastic depth is off at inference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.conv_dw(x)
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        x = self.mlp(x)
        x = x.permute(0, 3, 1, 2)
        x = x.mul(self.gamma.reshape(1, -1, 1, 1))
        x = self.drop_path(x) + self.shortcut(shortcut)
        return x


class ConvNeXtStage(nn.Module):
    def __init__(self, c_in: int, c_out: int, depth: int, layer_scale_init: float):
        super().__init__()
        if c_in != c_out:
            self.downsample = nn.Sequential(LayerNorm2d(c_in, eps=1e-6), nn.Conv2d(c_in, c_out, kernel_size=2, stride=2))
        else:
            self.downsample = nn.Identity()
        self.blocks = nn.Sequential(*[ConvNeXtBlock(c_out, layer_scale_init) for _ in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.downsample(x)
        x = self.blocks(x)
        return x


class ClassifierHead(nn.Module):
    """Pool, then norm, then the classifier (timm's NormMlpClassifierHead without a hidden layer)."""

    def __init__(self, features: int, num_classes: int):
        super().__init__()
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.norm = LayerNorm2d(features, eps=1e-6)
        self.flatten = nn.Flatten(1)
        self.pre_logits = nn.Identity()
        self.drop = nn.Dropout(0.0)
        self.fc = nn.Linear(features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.global_pool(x)
        x = self.norm(x)
        x = self.flatten(x)
        x = self.pre_logits(x)
        x = self.drop(x)
        x = self.fc(x)
        return x


class Model(nn.Module):
    def __init__(self, num_classes: int, dim: int, depths: tuple[int, int, int, int], layer_scale_init: float):
        super().__init__()
        dims = (dim, 2 * dim, 4 * dim, 8 * dim)
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], kernel_size=4, stride=4), LayerNorm2d(dims[0], eps=1e-6))
        stages, c_in = [], dims[0]
        for c_out, depth in zip(dims, depths):
            stages.append(ConvNeXtStage(c_in, c_out, depth, layer_scale_init))
            c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.norm_pre = nn.Identity()
        self.head = ClassifierHead(dims[-1], num_classes)
        for m in self.modules():  # timm's initialisation
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.stages(x)
        x = self.norm_pre(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.forward_features(x)
        return self.head(x)


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes, dim, (depth_1, depth_2, depth_3, depth_4), layer_scale_init]
