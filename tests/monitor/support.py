"""The monitor tests' toy network, fake memory and GPU sources, and a quiet monitor (CPU)."""

from __future__ import annotations

import torch
from torch import nn

from trainfit.monitor import FakeGpu, FakeMemory, GpuReading, MemoryReading, Monitor

GiB = 1 << 30
OOM_TEXT = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"


def fake_memory() -> FakeMemory:
    return FakeMemory(
        readings=[
            MemoryReading(
                allocated_bytes=1 * GiB,
                reserved_bytes=2 * GiB,
                peak_allocated_bytes=GiB + GiB // 2,
                total_bytes=80 * GiB,
            )
        ]
    )


def fake_gpu() -> FakeGpu:
    return FakeGpu(
        readings=[
            GpuReading(
                utilization_percent=50.0,
                power_watts=300.0,
                temperature_c=60.0,
                memory_used_bytes=3 * GiB,
            )
        ]
    )


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Boom(nn.Module):
    """Raises out-of-memory in its forward (`forward_oom`) or its backward (`backward_oom`)."""

    def __init__(self) -> None:
        super().__init__()
        self.forward_oom = False
        self.backward_oom = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.forward_oom:
            raise torch.OutOfMemoryError(OOM_TEXT)
        return _BoomInBackward.apply(x, self.backward_oom)


class _BoomInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: torch.Tensor, fail: bool) -> torch.Tensor:
        ctx.fail = fail  # type: ignore[attr-defined]
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        if ctx.fail:  # type: ignore[attr-defined]
            raise torch.OutOfMemoryError(OOM_TEXT)
        return grad, None


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.boom = Boom()
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(self.boom(x))


def train(model: nn.Module, mon: Monitor | None, steps: int = 3) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if mon is not None:
        mon.attach(optimizer=optimizer)
    torch.manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(4, 8)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if mon is not None:
            mon.step(loss=loss, lr=0.1)
    return losses


def quiet(**kwargs: object) -> Monitor:
    kwargs.setdefault("memory", fake_memory())
    kwargs.setdefault("gpu", fake_gpu())
    kwargs.setdefault("console", False)
    kwargs.setdefault("interval_s", 60.0)
    return Monitor(**kwargs)  # type: ignore[arg-type]
