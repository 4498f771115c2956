"""Optimizers for traced steps, taking the code path the target takes by default.

On CUDA, PyTorch's Adam, AdamW and SGD default to their foreach implementation; the traced
parameters are fake CPU tensors, for which the default would be the for-loop path, so the
path is passed explicitly. Adafactor takes its for-loop path unless asked (its functional
`adafactor()` picks foreach only when `foreach=True`; measured on an H100 with torch 2.11:
14 ops per parameter, the for-loop's count). 8-bit AdamW (bitsandbytes) is a stand-in
with the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainfit.spec import OptimizerKind

_BNB_BLOCK = 256
"""bitsandbytes quantises optimizer state in blocks of 256 values, one fp32 absmax each."""
_BNB_MIN_8BIT_SIZE = 4096
"""bitsandbytes keeps 32-bit state for tensors with fewer elements (min_8bit_size)."""


class EightBitAdamWStandIn(torch.optim.Optimizer):
    """bitsandbytes AdamW8bit's device memory: uint8 moments with fp32 block absmax.

    NB: bitsandbytes updates parameters and state in place in one fused kernel, so the step
    allocates nothing beyond the state; the arithmetic is not reproduced (fake tensors only).
    """

    def __init__(self, params: list[nn.Parameter], lr: float = 1e-4) -> None:
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    if p.numel() >= _BNB_MIN_8BIT_SIZE:
                        blocks = -(-p.numel() // _BNB_BLOCK)
                        state["state1"] = torch.zeros_like(p, dtype=torch.uint8)
                        state["state2"] = torch.zeros_like(p, dtype=torch.uint8)
                        state["absmax1"] = torch.zeros(blocks, dtype=torch.float32)
                        state["absmax2"] = torch.zeros(blocks, dtype=torch.float32)
                    else:
                        state["state1"] = torch.zeros_like(p, dtype=torch.float32)
                        state["state2"] = torch.zeros_like(p, dtype=torch.float32)


def make_optimizer(
    kind: OptimizerKind, params: list[nn.Parameter], foreach: bool
) -> torch.optim.Optimizer:
    """The optimizer `kind` over `params`, forced onto the foreach or for-loop path."""
    if kind is OptimizerKind.ADAMW:
        return torch.optim.AdamW(params, lr=1e-4, foreach=foreach)
    if kind is OptimizerKind.ADAM:
        return torch.optim.Adam(params, lr=1e-4, foreach=foreach)
    if kind is OptimizerKind.SGD:
        return torch.optim.SGD(params, lr=1e-3, foreach=foreach)
    if kind is OptimizerKind.SGD_MOMENTUM:
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach)
    if kind is OptimizerKind.ADAFACTOR:
        return torch.optim.Adafactor(params, lr=1e-3, foreach=False)
    return EightBitAdamWStandIn(params)
