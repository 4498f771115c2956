"""How `microbench` times: device seconds of one call or of calls back to back (CUDA events),
and host seconds per aten op (the ops counted under a dispatch mode)."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _device_time(fn: Any, repeat: int = 20, warmup: int = 3) -> float:
    """Median seconds of `fn` on the device (CUDA events around each call)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    times.sort()
    return times[len(times) // 2]


class _Count(TorchDispatchMode):
    """Counts the aten ops dispatched under it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _host_per_op(fn: Any, repeat: int = 200) -> dict[str, float]:
    """Host seconds per aten op of `fn` (ops counted in one call under a dispatch mode)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    with _Count() as count:
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    host = (time.perf_counter() - start) / repeat
    torch.cuda.synchronize()
    return {"ops": count.ops, "call_seconds": host, "op_seconds": host / max(1, count.ops)}


def _stream_time(fn: Any, calls: int = 50) -> float:
    """Median device seconds per call of `fn` issued `calls` times back to back (the host
    runs ahead, so launch latency is hidden as in a training step)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        # NB: a long kernel first lets the host queue the calls before the device reaches them
        torch.cuda._sleep(2_000_000)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0 / calls)
    times.sort()
    return times[len(times) // 2]
