"""Where a loop's host waits: the CUDA runtime calls of steady, unsynchronised steps, and how
busy the device is between them.

    # on the GPU: DIR/blocking.json
    PYTHONPATH=src:. python -m benchmarks.steptime.blocking --out DIR \
        --cases blind11:resnet18-fp32-b128-64px-sgdm,blind13:vq-bf16-b16-x8
    # here: the table
    PYTHONPATH=src:. python -m benchmarks.steptime.blocking DIR/blocking.json

`stalls.py` found steps whose loop period exceeds both the host's time per step read by phase
and the kernels' sum (ResNet-18 in fp32 at batch 128, the VQ autoencoder in bf16). This
profiles `--steps` steady steps of each case (built as `window.py` builds it,
`measure_gpu.make_step`; 10 synced warm-up steps, then 5 unprofiled, then the profiled ones,
one sync at the end) with torch.profiler, CPU and CUDA: per CUDA runtime call (cudaLaunchKernel,
cudaStreamSynchronize, cudaMemcpyAsync, cudaMalloc, ...) its count and host time a step; the
kernels' and memory copies' device time a step; the device's idle time a step (the loop's wall
time less the union of its kernels' intervals) and the longest idle gap; the wall time a step.
The profiler adds its own host cost to each op, so the host figures are upper bounds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.fresh import study_main
from benchmarks.steptime.measure_gpu import make_step


def _busy(intervals: list[tuple[float, float]]) -> tuple[float, float]:
    """The union's length of `intervals` (us) and the longest gap between them."""
    total, gap, end = 0.0, 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            if end is not None:
                gap = max(gap, start - end)
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total, gap


def run_one(build: dict[str, Any], steps: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    _, step = make_step(build)
    for _ in range(10):
        step()
        torch.cuda.synchronize()
    for _ in range(5):
        step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        started = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        wall = time.perf_counter() - started
    runtime: dict[str, dict[str, float]] = {}
    device: list[tuple[float, float]] = []
    kernel_us = copy_us = 0.0
    for event in prof.events():
        kind = str(event.device_type)
        if kind.endswith("CUDA"):
            begin = event.time_range.start
            device.append((begin, event.time_range.end))
            if "Memcpy" in event.name or "Memset" in event.name:
                copy_us += event.time_range.elapsed_us()
            else:
                kernel_us += event.time_range.elapsed_us()
        elif event.name.startswith("cuda") or event.name.startswith("cu"):
            row = runtime.setdefault(event.name, {"count": 0, "us": 0.0})
            row["count"] += 1
            row["us"] += event.time_range.elapsed_us()
    busy, gap = _busy(device)
    span = (max(e for _, e in device) - min(s for s, _ in device)) if device else 0.0
    return {
        "wall_ms_per_step": wall / steps * 1e3,
        "kernel_ms_per_step": kernel_us / steps / 1e3,
        "copy_ms_per_step": copy_us / steps / 1e3,
        "device_busy_ms_per_step": busy / steps / 1e3,
        "device_span_ms_per_step": span / steps / 1e3,
        "longest_idle_gap_ms": gap / 1e3,
        "runtime_per_step": {
            name: {"count": r["count"] / steps, "ms": r["us"] / steps / 1e3}
            for name, r in sorted(runtime.items(), key=lambda kv: -kv[1]["us"])
        },
    }


def report(path: Path) -> None:
    record = json.loads(path.read_text())
    print(
        "| case | wall ms a step | kernels ms | device busy ms (span) | longest idle gap ms "
        "| CUDA runtime calls a step: count, host ms (top 4) |"
    )
    print("|---|---:|---:|---|---:|---|")
    for run in record["runs"]:
        if "error" in run:
            print(f"| {run['case']} | error: {run['error']} | | | | |")
            continue
        r = run["profile"]
        calls = "; ".join(
            f"{name} {v['count']:.0f}, {v['ms']:.2f}"
            for name, v in list(r["runtime_per_step"].items())[:4]
        )
        print(
            f"| {run['case']} | {r['wall_ms_per_step']:.2f} | {r['kernel_ms_per_step']:.2f} | "
            f"{r['device_busy_ms_per_step']:.2f} ({r['device_span_ms_per_step']:.2f}) | "
            f"{r['longest_idle_gap_ms']:.2f} | {calls} |"
        )


def main() -> None:
    study_main("benchmarks.steptime.blocking", "profile", run_one, report, steps=10, deadline=200.0)


if __name__ == "__main__":
    main()
