"""A step's host and device sides apart: for the misses of a blind set, which side the model
gets wrong.

    # on the GPU: DIR/host_split.json
    PYTHONPATH=src:. python -m benchmarks.steptime.host_split --profile --out DIR \
        --cases blind11:resnet18-fp32-b128-64px-sgdm,blind10:resnet18-fp32-b48-112px-sgdm
    # here: each case's measured and modelled host and device milliseconds a step
    PYTHONPATH=src:. python -m benchmarks.steptime.host_split DIR/host_split.json

On the GPU, each case (built as `window.py` builds it, in one process after 5 warm-up steps):
- host: the seconds `step()` takes to return when the device is idle at its start (a
  synchronise before each of 15 steps; the step itself never waits for the device, so this is
  the host's time to issue it), median. NB: in every committed row it came within 3% of the
  synchronised step, device-bound ResNet-50 included, and 1.3-2x the steady loop's period
  (README): it does not isolate the host;
- device: the kernels' device time a step (torch.profiler, 3 steps), as `kinds.py` sums it;
- the aten ops' own host time a step (`self_cpu_time_total`), the 25 largest.
Here, the model's sides: its device time (`kinds.predicted`, summed) and its host time (the
step with every kernel timed 1e-9 of its time: what is left is the host issuing it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import case_set


def measure_case(build: dict[str, Any]) -> dict[str, Any]:
    import torch

    from benchmarks.steptime.measure_gpu import make_step

    _, step = make_step(build)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    issue, total = [], []
    for _ in range(15):
        torch.cuda.synchronize()
        started = time.perf_counter()
        step()
        issued = time.perf_counter()
        torch.cuda.synchronize()
        issue.append(issued - started)
        total.append(time.perf_counter() - started)
    device_ms, cpu = profiled(step)
    ops = {k: ms for k, ms in cpu.items() if k.startswith("aten::") or k.startswith("cudnn")}
    return {
        "host_ms": statistics.median(issue) * 1e3,
        "synced_ms": statistics.median(total) * 1e3,
        "device_ms": device_ms,
        "cpu_ops_ms": dict(sorted(ops.items(), key=lambda kv: -kv[1])[:25]),
    }


def profiled(step: Any, steps: int = 3) -> tuple[float, dict[str, float]]:
    """`steps` steps under torch.profiler: the kernels' device milliseconds a step, and each
    profiled name's own host milliseconds a step (`self_cpu_time_total`, where above 0)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    device_us = sum(e.device_time for e in prof.events() if e.device_type.name == "CUDA")
    cpu = {
        e.key: e.self_cpu_time_total / steps / 1e3
        for e in prof.key_averages()
        if e.self_cpu_time_total > 0
    }
    return device_us / steps / 1e3, cpu


def modelled(set_name: str, name: str) -> tuple[float, float]:
    """The model's host and device milliseconds a step of the case on the H100."""
    from benchmarks.steptime.kinds import predicted
    from benchmarks.steptime.predict import spec_kwargs
    from trainfit.hardware.catalog import get_device
    from trainfit.spec import TrainSpec
    from trainfit.timing.step import step_time
    from trainfit.trace.step import trace_step

    kwargs = spec_kwargs(name, case_set(set_name))
    device_ms = sum(predicted(kwargs).values())
    spec = TrainSpec(**kwargs)
    trace = trace_step(spec)
    host = step_time(
        trace.costs,
        spec,
        get_device("h100"),
        trainable_tensors=trace.trainable_tensors,
        device_time_factor=1e-9,
        op_class_factors={},
    )
    return host.seconds * 1e3, device_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("record", nargs="?", type=Path)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--cases", default="")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.profile:
        rows = []
        args.out.mkdir(parents=True, exist_ok=True)
        for item in args.cases.split(","):
            set_name, name = item.split(":")
            row = measure_case(case_set(set_name)[name]["build"])
            rows.append({"set": set_name, "case": name, **row})
            (args.out / "host_split.json").write_text(json.dumps(rows, indent=1) + "\n")
            print(name, f"host {row['host_ms']:.2f} device {row['device_ms']:.2f}", flush=True)
        return
    print("| case | host ms: model / measured | ratio | device ms: model / profiled | ratio |")
    print("|---|---:|---:|---:|---:|")
    for row in json.loads(args.record.read_text()):
        host, device = modelled(row["set"], row["case"])
        print(
            f"| {row['set']}/{row['case']} | {host:.2f} / {row['host_ms']:.2f} | "
            f"{host / row['host_ms']:.2f} | {device:.2f} / {row['device_ms']:.2f} | "
            f"{device / row['device_ms']:.2f} |"
        )


if __name__ == "__main__":
    main()
