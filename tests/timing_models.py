"""A model whose FLOPs are known by hand, for the step-time tests."""

from torch import nn


def two_layer_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
