"""Why a host-bound step's loop period exceeds both its host time and its kernels: every step of
a loop timed alone, with Python's garbage collections and the GPU's clocks beside it.

    # on the GPU: DIR/stalls.json
    PYTHONPATH=src:. python -m benchmarks.steptime.stalls --out DIR \
        --cases blind11:resnet18-fp32-b128-64px-sgdm,blind13:vq-bf16-b16-x8
    # here: the table
    PYTHONPATH=src:. python -m benchmarks.steptime.stalls DIR/stalls.json

The phases study (`phases.py`) found loops whose period (ResNet-18 in fp32 at batch 128: 10.2
ms) is well over the host's median time per step (7.2 ms, its phases summed) and over the
kernels' sum (6.1 ms): medians hide what a mean counts. Each case runs in a fresh process
(`--one`), built as `window.py` builds it (`measure_gpu.make_step`): 10 synced warm-up steps,
then three loops of `--steps` steps that never synchronise (the collector on, off after a
`gc.collect()`, on again), each step's start read on the host (`time.perf_counter`) and
recorded on the stream (a CUDA event). Per loop: the period (the loop's wall time to its final
sync, over its steps), the host's and the device's time per step (median, mean, 90th
percentile, the longest), the steps over twice the median, and the collections the collector
ran (`gc.callbacks`: count and seconds by generation). The GPU's SM clock, power draw and
clock-event reasons (NVML) are read before and after each loop; nothing is set.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.fresh import study_main
from benchmarks.steptime.measure_gpu import make_step

LOOPS = ("gc on", "gc off", "gc on again")


def _clocks() -> dict[str, Any]:
    """The GPU's SM clock (MHz), power (W) and clock-event reasons (NVML's bit mask); empty
    where NVML is missing."""
    try:
        import pynvml
    except ImportError:
        return {}
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    return {
        "sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
        "reasons": pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
    }


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    median = statistics.median(ordered)
    return {
        "median_ms": median * 1e3,
        "mean_ms": statistics.fmean(ordered) * 1e3,
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1e3,
        "max_ms": ordered[-1] * 1e3,
        "over_twice_median": sum(v > 2 * median for v in ordered),
    }


def loop(step: Any, steps: int) -> dict[str, Any]:
    """One loop of `steps` steps without a sync: its period and per-step spreads."""
    import torch

    collections: list[tuple[int, float]] = []
    started: dict[int, float] = {}

    def watch(phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            started[info["generation"]] = now
        else:
            collections.append((info["generation"], now - started.pop(info["generation"], now)))

    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    host: list[float] = []
    before = _clocks()
    torch.cuda.synchronize()
    gc.callbacks.append(watch)
    begin = time.perf_counter()
    for i in range(steps):
        host.append(time.perf_counter())
        events[i].record()
        step()
    events[steps].record()
    torch.cuda.synchronize()
    end = time.perf_counter()
    gc.callbacks.remove(watch)
    host.append(end)
    device = [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(steps)]
    by_generation = {
        str(g): {
            "count": sum(1 for gen, _ in collections if gen == g),
            "seconds": sum(s for gen, s in collections if gen == g),
        }
        for g in (0, 1, 2)
    }
    return {
        "period_ms": (end - begin) / steps * 1e3,
        "host": _spread([host[i + 1] - host[i] for i in range(steps - 1)]),
        "device": _spread(device[1:]),
        "collections": by_generation,
        "clocks_before": before,
        "clocks_after": _clocks(),
    }


def run_one(build: dict[str, Any], steps: int) -> dict[str, Any]:
    import torch

    _, step = make_step(build)
    for _ in range(10):
        step()
        torch.cuda.synchronize()
    out = {}
    for name in LOOPS:
        if name == "gc off":
            gc.collect()
            gc.disable()
        out[name] = loop(step, steps)
        gc.enable()
    return out


def report(path: Path) -> None:
    record = json.loads(path.read_text())
    print(
        "| case | loop | period ms | host ms: median / mean / p90 / max | device ms: median / "
        "mean / max | steps over 2x median (host, device) | collections (gen 0/1/2) | ms in "
        "them a step | SM MHz after |"
    )
    print("|---|---|---:|---|---|---|---|---:|---:|")
    for run in record["runs"]:
        if "error" in run:
            print(f"| {run['case']} | error: {run['error']} | | | | | | | |")
            continue
        for name in LOOPS:
            r = run["loops"][name]
            h, d, c = r["host"], r["device"], r["collections"]
            steps = record["settings"]["steps"]
            gc_ms = sum(v["seconds"] for v in c.values()) / steps * 1e3
            print(
                f"| {run['case']} | {name} | {r['period_ms']:.2f} | {h['median_ms']:.2f} / "
                f"{h['mean_ms']:.2f} / {h['p90_ms']:.2f} / {h['max_ms']:.1f} | "
                f"{d['median_ms']:.2f} / {d['mean_ms']:.2f} / {d['max_ms']:.1f} | "
                f"{h['over_twice_median']}, {d['over_twice_median']} | "
                f"{'/'.join(str(c[g]['count']) for g in ('0', '1', '2'))} | {gc_ms:.3f} | "
                f"{r['clocks_after'].get('sm_mhz', '-')} |"
            )


def main() -> None:
    study_main("benchmarks.steptime.stalls", "loops", run_one, report, steps=150, deadline=240.0)


if __name__ == "__main__":
    main()
