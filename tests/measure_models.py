"""Small models whose failures are scripted, for the measure tests (built through import paths,
as a user's project would be)."""

from __future__ import annotations

import torch
from torch import nn

LIMITS = {"train": 1 << 30, "eval": 1 << 30, "interrupt_after": 1 << 30, "fail_rank": -1}
"""Batch sizes above which the capped model's forward raises out of memory (training and
evaluation mode), and the forward call that raises KeyboardInterrupt; set by the tests."""
CALLS = {"forward": 0}
CAPPED = dict(
    model="tests.measure_models:capped_mlp", inputs=("x=B,16:float32",), device="cpu", batch=4
)
"""The capped model's spec on the CPU, at batch 4."""


class _Capped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        CALLS["forward"] += 1
        if CALLS["forward"] > LIMITS["interrupt_after"]:
            raise KeyboardInterrupt
        distributed = LIMITS["fail_rank"] >= 0 and torch.distributed.is_initialized()
        if distributed and torch.distributed.get_rank() == LIMITS["fail_rank"]:
            raise ValueError("a bug on one rank only")
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


class _Exits(nn.Module):
    """A model whose forward calls sys.exit, as a script's model may on a bad input."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise SystemExit(5)


def exiting_mlp() -> nn.Module:
    return _Exits()


class _TooBig(nn.Module):
    """A model whose weights do not fit the device: moving it runs out of memory."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(16, 4)

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 300.00 GiB")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def too_big() -> nn.Module:
    return _TooBig()
