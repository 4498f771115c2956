"""Two plain modules for the CPU step-time check: a wide MLP and a small CNN (no BatchNorm)."""

from __future__ import annotations

from torch import nn


def wide_mlp() -> nn.Module:
    """1024 -> 4096 -> 4096 -> 1024 with GELU: 25.2M parameters."""
    return nn.Sequential(
        nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024)
    )


def small_cnn() -> nn.Module:
    """Four 3x3 convolutions (32-64-128-128 channels, stride 2 from the second) on 3x64x64,
    average pooling and a 10-way linear head: 0.26M parameters."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(128, 128, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    )  # fmt: skip


def conv_net() -> nn.Module:
    """Five 3x3 convolutions (16-32-64-64-128 channels; stride 2 on the 2nd, 4th and 5th)
    on 3x96x96 with ReLU, average pooling and a 10-way head: 0.17M parameters."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    )  # fmt: skip
