"""A NetVLAD pooling head (Arandjelovic et al. 2016) on a small conv
backbone: soft assignment of every local descriptor to K clusters (1x1 conv,
softmax over clusters), residuals to the learned centroids aggregated by
the assignment weights (a batched matmul), intra-normalisation per cluster,
flatten and a final L2 normalisation."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
image_size = 56
in_channels = 3
dim = 256
n_clusters = 64
alpha = 100.0


class NetVLAD(nn.Module):
    def __init__(self, n_clusters: int, dim: int, alpha: float):
        super().__init__()
        self.alpha = alpha
        self.centroids = nn.Parameter(torch.rand(n_clusters, dim))
        self.conv = nn.Conv2d(dim, n_clusters, 1)
        with torch.no_grad():
            self.conv.weight.copy_((2.0 * alpha * self.centroids).unsqueeze(-1).unsqueeze(-1))
            self.conv.bias.copy_(-alpha * self.centroids.norm(dim=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c = x.shape[:2]
        x = F.normalize(x, p=2, dim=1)
        soft_assign = F.softmax(self.conv(x).view(b, -1, x.shape[2] * x.shape[3]), dim=1)   # (b, K, N)
        x_flat = x.view(b, c, -1)                                                               # (b, D, N)
        vlad = soft_assign @ x_flat.transpose(1, 2) - soft_assign.sum(-1).unsqueeze(-1) * self.centroids  # (b, K, D)
        vlad = F.normalize(vlad, p=2, dim=2)
        return F.normalize(vlad.flatten(1), p=2, dim=1)


class Model(nn.Module):
    def __init__(self, in_channels: int, dim: int, n_clusters: int, alpha: float):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(in_channels, dim // 2, 3, padding=1), nn.BatchNorm2d(dim // 2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(dim // 2, dim, 3, padding=1), nn.BatchNorm2d(dim), nn.ReLU(inplace=True),
        )
        self.pool = NetVLAD(n_clusters, dim, alpha)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.backbone(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, dim, n_clusters, alpha]
