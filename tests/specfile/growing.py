"""Models of `trainfit check`'s tests: the same network before and after a change."""

from torch import nn

INPUT = "input=B,512:float32"


def small() -> nn.Module:
    """1.0M parameters."""
    return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512))


def wide() -> nn.Module:
    """`small` with its hidden layer 8x wider: 8.4M parameters (+112 MiB of fp32 weights,
    gradients and AdamW state)."""
    return nn.Sequential(nn.Linear(512, 8192), nn.ReLU(), nn.Linear(8192, 512))


def huge() -> nn.Module:
    """1.08B parameters (input 512 wide): 16 GiB of fp32 weights, gradients and AdamW state,
    more than an 8 GB GPU holds on any rung of the ladder."""
    return nn.Sequential(nn.Linear(512, 16384), *[nn.Linear(16384, 16384) for _ in range(4)])
