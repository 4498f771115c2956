"""A model whose FLOPs are known by hand, for the step-time tests."""

from torch import nn


def two_layer_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def wide_sequential() -> nn.Module:
    """Ten billion parameters in an nn.Sequential: no ModuleList of blocks to checkpoint."""
    return nn.Sequential(*(nn.Linear(16384, 16384) for _ in range(40)))
