"""A U-Net (Ronneberger et al. 2015) with three levels: double 3x3 conv
blocks (BatchNorm, ReLU), max-pool downsampling, ConvTranspose2d upsampling,
skip connections concatenated on channels, a 1x1 output head."""
import torch
import torch.nn as nn

batch_size = 8
image_size = 256
in_channels = 3
base_width = 32
out_channels = 2


class DoubleConv(nn.Sequential):
    def __init__(self, c_in: int, c_out: int):
        super().__init__(
            nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
        )


class Up(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(c_in, c_in // 2, 2, stride=2)
        self.conv = DoubleConv(c_in, c_out)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class Model(nn.Module):
    def __init__(self, in_channels: int, base_width: int, out_channels: int):
        super().__init__()
        w = base_width
        self.inc = DoubleConv(in_channels, w)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(w, 2 * w))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(2 * w, 4 * w))
        self.bottom = nn.Sequential(nn.MaxPool2d(2), DoubleConv(4 * w, 8 * w))
        self.up1 = Up(8 * w, 4 * w)
        self.up2 = Up(4 * w, 2 * w)
        self.up3 = Up(2 * w, w)
        self.outc = nn.Conv2d(w, out_channels, 1)
        for m in self.modules():  # He initialisation (fan-in, so depthwise convs too): a signal that survives the depth
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.bottom(x3)
        x = self.up3(self.up2(self.up1(x, x3), x2), x1)
        return self.outc(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, base_width, out_channels]
