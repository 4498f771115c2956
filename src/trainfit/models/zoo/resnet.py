"""ResNet-50 of the catalogue, as torchvision builds it."""

from __future__ import annotations

import torch
from torch import nn

# ---------------------------------------------------------------------------------------------
# ResNet-50 (torchvision's architecture)
# ---------------------------------------------------------------------------------------------


class _Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck: stride on the 3x3 conv, expansion 4."""

    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        c_out = 4 * width
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, H, W) -> (B, 4*width, H/stride, W/stride)."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class _ResNet(nn.Module):
    """torchvision's ResNet with bottleneck blocks; parameter names match its state dict."""

    def __init__(self, layers: tuple[int, int, int, int], num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        c_in = 64
        stages = []
        for i, n in enumerate(layers):
            width = 64 * 2**i
            blocks = [_Bottleneck(c_in, width, 1 if i == 0 else 2)]
            blocks += [_Bottleneck(4 * width, width, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*blocks))
            c_in = 4 * width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, 3, H, W) float -> logits (B, num_classes)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(num_classes: int = 1000) -> nn.Module:
    """ResNet-50 (He et al., 2016) exactly as torchvision builds it (v1.5, blocks [3, 4, 6, 3]).

    Not from users' notes: a well-known reference with a known parameter count, 25,557,032 for 1000
    classes (torchvision's ``resnet50``). Weight initialisation is PyTorch's default, not
    torchvision's, which does not change shapes or memory.

    forward(x: (B, 3, 224, 224) float) -> logits (B, num_classes).
    """
    return _ResNet((3, 4, 6, 3), num_classes)
