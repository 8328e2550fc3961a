"""A hand-written MobileNetV3-Small laid out as
``torchvision.models.mobilenet_v3_small`` is (Howard et al. 2019), for
machines where torchvision cannot be imported: the same module types and
forward code shapes (``features`` of conv-BatchNorm-activation
``Sequential``s and ``InvertedResidual`` blocks: 1x1 expand, depthwise
kxk, a ``SqueezeExcitation`` (AdaptiveAvgPool2d, 1x1 ``fc1``, ReLU, 1x1
``fc2``, Hardsigmoid, ``scale * input``), 1x1 project, ``result += input``;
Hardswish or ReLU in place; then AdaptiveAvgPool2d, ``torch.flatten`` and a
Linear-Hardswish-Dropout-Linear ``classifier``), BatchNorm with eps 1e-3,
torchvision's initialisation and random weights, eval mode.
``width_mult`` scales every layer's channels as torchvision's does."""
import torch
import torch.nn as nn

batch_size = 16
image_size = 224
num_classes = 1000
width_mult = 1.0

# per block: input, kernel, expanded, output channels, squeeze-excitation?, activation, stride (mobilenet_v3_small)
BLOCKS = (
    (16, 3, 16, 16, True, "RE", 2),
    (16, 3, 72, 24, False, "RE", 2),
    (24, 3, 88, 24, False, "RE", 1),
    (24, 5, 96, 40, True, "HS", 2),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 120, 48, True, "HS", 1),
    (48, 5, 144, 48, True, "HS", 1),
    (48, 5, 288, 96, True, "HS", 2),
    (96, 5, 576, 96, True, "HS", 1),
    (96, 5, 576, 96, True, "HS", 1),
)
LAST_CHANNEL = 1024


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round ``value`` to the nearest multiple of ``divisor`` (at least
    ``divisor``), never more than 10% below it (the MobileNet rule)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_norm_act(c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1, activation: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, kernel, stride, padding=(kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out, eps=0.001, momentum=0.01),
    ]
    if activation is not None:
        layers.append(activation(inplace=True))
    return nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, input_channels: int, squeeze_channels: int):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def _scale(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.avgpool(x)
        scale = self.fc1(scale)
        scale = self.activation(scale)
        scale = self.fc2(scale)
        return self.scale_activation(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self._scale(x)
        return scale * x


class InvertedResidual(nn.Module):
    def __init__(self, c_in: int, kernel: int, expanded: int, c_out: int, use_se: bool, activation_name: str, stride: int):
        super().__init__()
        self.use_res_connect = stride == 1 and c_in == c_out
        activation = nn.Hardswish if activation_name == "HS" else nn.ReLU
        layers: list[nn.Module] = []
        if expanded != c_in:
            layers.append(conv_norm_act(c_in, expanded, 1, activation=activation))
        layers.append(conv_norm_act(expanded, expanded, kernel, stride, groups=expanded, activation=activation))
        if use_se:
            layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4)))
        layers.append(conv_norm_act(expanded, c_out, 1, activation=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.block(x)
        if self.use_res_connect:
            result += x
        return result


class Model(nn.Module):
    def __init__(self, num_classes: int, width_mult: float):
        super().__init__()

        def width(channels: int) -> int:  # torchvision's adjust_channels
            return make_divisible(channels * width_mult)

        layers: list[nn.Module] = [conv_norm_act(3, width(BLOCKS[0][0]), 3, stride=2, activation=nn.Hardswish)]
        for c_in, kernel, expanded, c_out, use_se, act, stride in BLOCKS:
            layers.append(InvertedResidual(width(c_in), kernel, width(expanded), width(c_out), use_se, act, stride))
        last_in = width(BLOCKS[-1][3])
        layers.append(conv_norm_act(last_in, 6 * last_in, 1, activation=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last_channel = width(LAST_CHANNEL)
        self.classifier = nn.Sequential(
            nn.Linear(6 * last_in, last_channel),
            nn.Hardswish(inplace=True),
            nn.Dropout(p=0.2, inplace=True),
            nn.Linear(last_channel, num_classes),
        )
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
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
    return [num_classes, width_mult]
