"""A hand-written EfficientNet-B0 laid out as
``torchvision.models.efficientnet_b0`` is (Tan and Le 2019), for machines
where torchvision cannot be imported: the same module types and forward
code shapes (``features``: a 3x3 stride-2 conv-BatchNorm-SiLU stem, seven
stages of ``MBConv`` blocks (1x1 expand, depthwise kxk, a
``SqueezeExcitation`` with SiLU and Sigmoid, 1x1 project, then
``stochastic_depth`` (an identity in eval) and ``result += input`` where
shapes allow), a 1x1 conv-BatchNorm-SiLU head; AdaptiveAvgPool2d,
``torch.flatten``, a Dropout-Linear ``classifier``), torchvision's
initialisation and random weights, eval mode.  ``width_mult`` and
``depth_mult`` scale channels and blocks per stage as EfficientNet's
compound scaling does (1.0 and 1.0 for B0)."""
import math

import torch
import torch.nn as nn

batch_size = 16
image_size = 224
num_classes = 1000
width_mult = 1.0
depth_mult = 1.0
stochastic_depth_prob = 0.2

# per stage: expand ratio, kernel, stride, input channels, output channels, blocks (efficientnet_b0)
STAGES = (
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
)


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round ``value`` to the nearest multiple of ``divisor`` (at least
    ``divisor``), never more than 10% below it."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_norm_act(c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1, activation: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, kernel, stride, padding=(kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out),
    ]
    if activation:
        layers.append(nn.SiLU(inplace=True))
    return nn.Sequential(*layers)


class StochasticDepth(nn.Module):
    """Drops whole residual branches per sample in training ("row" mode);
    an identity in eval."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        noise = torch.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device).bernoulli_(keep)
        return x * noise.div_(keep)


class SqueezeExcitation(nn.Module):
    def __init__(self, input_channels: int, squeeze_channels: int):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = nn.SiLU(inplace=True)
        self.scale_activation = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.avgpool(x)
        scale = self.fc1(scale)
        scale = self.activation(scale)
        scale = self.fc2(scale)
        return self.scale_activation(scale) * x


class MBConv(nn.Module):
    def __init__(self, expand_ratio: int, kernel: int, stride: int, c_in: int, c_out: int, drop_prob: float):
        super().__init__()
        self.use_res_connect = stride == 1 and c_in == c_out
        expanded = make_divisible(c_in * expand_ratio)
        layers: list[nn.Module] = []
        if expanded != c_in:
            layers.append(conv_norm_act(c_in, expanded, 1))
        layers.append(conv_norm_act(expanded, expanded, kernel, stride, groups=expanded))
        layers.append(SqueezeExcitation(expanded, max(1, c_in // 4)))
        layers.append(conv_norm_act(expanded, c_out, 1, activation=False))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(drop_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.block(x)
        if self.use_res_connect:
            result = self.stochastic_depth(result)
            result += x
        return result


class Model(nn.Module):
    def __init__(self, num_classes: int, width_mult: float, depth_mult: float, stochastic_depth_prob: float):
        super().__init__()
        stages = [(e, k, s, make_divisible(ci * width_mult), make_divisible(co * width_mult), int(math.ceil(n * depth_mult)))
                  for e, k, s, ci, co, n in STAGES]
        layers: list[nn.Module] = [conv_norm_act(3, stages[0][3], 3, stride=2)]
        total_blocks, block_id = sum(stage[5] for stage in stages), 0
        for expand, kernel, stride, c_in, c_out, n_blocks in stages:
            stage: list[nn.Module] = []
            for k in range(n_blocks):
                drop_prob = stochastic_depth_prob * block_id / total_blocks  # deeper blocks are dropped more often
                stage.append(MBConv(expand, kernel, stride if k == 0 else 1, c_in if k == 0 else c_out, c_out, drop_prob))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        last_in = stages[-1][4]
        layers.append(conv_norm_act(last_in, 4 * last_in, 1))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=0.2, inplace=True), nn.Linear(4 * last_in, num_classes))
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                bound = 1.0 / math.sqrt(m.out_features)
                nn.init.uniform_(m.weight, -bound, bound)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes, width_mult, depth_mult, stochastic_depth_prob]
