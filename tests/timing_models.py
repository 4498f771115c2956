"""A model whose FLOPs are known by hand, for the step-time tests."""

from torch import nn


def two_layer_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def wide_sequential() -> nn.Module:
    """Ten billion parameters in an nn.Sequential: no ModuleList of blocks to checkpoint."""
    return nn.Sequential(*(nn.Linear(16384, 16384) for _ in range(40)))


def gemm_mlp() -> nn.Module:
    """Two 1024 x 4096 layers: at a batch of thousands its step is GEMM-bound on any GPU."""
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))
