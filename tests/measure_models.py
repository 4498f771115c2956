"""Small models whose failures are scripted, for the measure tests (built through import paths,
as a user's project would be)."""

from __future__ import annotations

import torch
from torch import nn

LIMITS = {"train": 1 << 30, "eval": 1 << 30, "interrupt_after": 1 << 30}
"""Batch sizes above which the capped model's forward raises out of memory (training and
evaluation mode), and the forward call that raises KeyboardInterrupt; set by the tests."""
CALLS = {"forward": 0}


class _Capped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS["forward"] += 1
        if CALLS["forward"] > LIMITS["interrupt_after"]:
            raise KeyboardInterrupt
        cap = LIMITS["train"] if self.training else LIMITS["eval"]
        if x.shape[0] > cap:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate 2.00 GiB (batch {x.shape[0]})"
            )
        return self.body(x)


def capped_mlp() -> nn.Module:
    return _Capped()


class _Broken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(16, 32)
        self.second = nn.Linear(33, 4)  # NB: wrong on purpose: 32 features arrive

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


def broken_mlp() -> nn.Module:
    return _Broken()
