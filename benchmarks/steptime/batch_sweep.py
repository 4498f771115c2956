"""One network's step across micro-batches: where a host-bound step's period goes as the batch
grows, for the ResNet-18 steps the blind sets under-timed at larger batches.

    # on the GPU: DIR/batch_sweep.json
    PYTHONPATH=src:. python -m benchmarks.steptime.batch_sweep --out DIR
    # here: each row's measured period and device time against the model's
    PYTHONPATH=src:. python -m benchmarks.steptime.batch_sweep DIR/batch_sweep.json

Each row (ResNet-18 on 64 x 64 images, 100 classes, SGD with momentum; fp32, and bf16 under
autocast) runs in one process after 5 warm-up steps: its period is the median over 3 timings
of 20 steps issued without a synchronisation (the loop's steady period); then 3 steps under
torch.profiler give the kernels' device time a step and each aten op's own host time a step
(`self_cpu_time_total`, the profiler's overhead included: compare rows, not absolutes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.blind9_cases import _cnn

ROWS = (*(("fp32", b) for b in (8, 32, 64, 128, 256)), ("bf16", 32), ("bf16", 128))


def case(dtype: str, batch: int) -> dict[str, Any]:
    return _cnn("resnet18", "B,3,64,64", batch, 100, dtype, "sgd-momentum")


def measure_row(dtype: str, batch: int) -> dict[str, Any]:
    import torch

    from benchmarks.steptime.host_split import profiled
    from benchmarks.steptime.measure_gpu import make_step

    _, step = make_step(case(dtype, batch)["build"])
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    periods = []
    for _ in range(3):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        periods.append((time.perf_counter() - started) / 20)
    device_ms, cpu = profiled(step)
    return {
        "dtype": dtype,
        "batch": batch,
        "period_ms": statistics.median(periods) * 1e3,
        "periods_ms": [p * 1e3 for p in periods],
        "device_ms": device_ms,
        "cpu_ops_ms": dict(sorted(cpu.items(), key=lambda kv: -kv[1])[:30]),
    }


PHASE_ROWS = ((8, 32), (8, 64), (8, 128), (8, 224), (32, 64), (128, 32), (128, 64), (256, 64))
"""(micro-batch, image side) of the phase rows: fp32, SGD with momentum."""


def measure_phases(batch: int, side: int) -> dict[str, Any]:
    """The host's seconds a step in each phase (forward and loss, backward, optimizer and
    zero_grad) of ResNet-18 on `side` px at micro-batch `batch` (fp32, SGD with momentum), and
    the loop's period: `phases.measure_case`."""
    from benchmarks.steptime.phases import measure_case

    build = _cnn("resnet18", f"B,3,{side},{side}", batch, 100, "fp32", "sgd-momentum")["build"]
    return {"batch": batch, "side": side, **measure_case(build)}


def table(rows: list[dict[str, Any]]) -> list[str]:
    from trainfit import estimate

    lines = [
        "| dtype | batch | period ms: model / measured | ratio | device ms: measured |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        spec = case(row["dtype"], row["batch"])["spec"]
        model = estimate(device="h100", **spec).step_time.seconds * 1e3
        lines.append(
            f"| {row['dtype']} | {row['batch']} | {model:.2f} / {row['period_ms']:.2f} | "
            f"{model / row['period_ms']:.2f} | {row['device_ms']:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("record", nargs="?", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--phases", action="store_true")
    args = parser.parse_args()
    if args.out and args.phases:
        args.out.mkdir(parents=True, exist_ok=True)
        rows = []
        for batch, side in PHASE_ROWS:
            rows.append(measure_phases(batch, side))
            (args.out / "phases.json").write_text(json.dumps(rows, indent=1) + "\n")
            print(rows[-1], flush=True)
        return
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        rows = []
        for dtype, batch in ROWS:
            rows.append(measure_row(dtype, batch))
            (args.out / "batch_sweep.json").write_text(json.dumps(rows, indent=1) + "\n")
            print(dtype, batch, f"{rows[-1]['period_ms']:.2f} ms", flush=True)
        return
    print("\n".join(table(json.loads(args.record.read_text()))))


if __name__ == "__main__":
    main()
