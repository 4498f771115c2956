"""Data-parallel step time: the model's added cost of DDP over one GPU against measured.

    PYTHONPATH=src:. python -m benchmarks.timing.compare_ddp benchmarks/timing/results/ddp_h200

Each GPU runs the spec's micro-batch (so N GPUs take N times the samples per step). Measured:
the median step on one GPU (no DDP) and on N with DDP (`measure_ddp.py`). Predicted: the
step time of the spec on the card's catalog row, then `trainfit.timing.run.run_time` for N
GPUs at an effective batch of N micro-batches (which adds the all-reduce it leaves exposed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.timing.measure_ddp import DDP_CASES
from trainfit.hardware.catalog import get_device
from trainfit.spec import TrainSpec
from trainfit.timing.run import RunSpec, Stage, run_time
from trainfit.timing.step import step_time
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target


def main() -> None:
    folder = Path(sys.argv[1])
    one = json.loads((folder / "ddp_1.json").read_text())
    two = json.loads((folder / "ddp_2.json").read_text())
    card = one["device"]
    device = get_device("h200" if "H200" in card else "h100")
    n = two["world_size"]
    print(f"# DDP over {n} x {card}: measured against the model\n")
    print(
        f"torch {two['torch']}, NCCL {two['nccl']}, 2026-11-26; NVLink between the two GPUs "
        "(`topology.txt`). Step times are medians of 10 steps after 3 warm-up steps. The "
        f"model uses the catalog row `{device.name}` (H100 efficiencies, {device.display}'s "
        "rates and NVLink figure).\n"
    )
    print(
        f"| case | 1 GPU ms (meas / pred) | {n} GPUs ms (meas / pred) | DDP adds ms (meas / pred) |"
    )
    print("|---|---:|---:|---:|")
    for name, kwargs in DDP_CASES.items():
        spec = TrainSpec(**kwargs, device=device.name)
        trace = trace_step(spec, target=Target.of(device))
        step = step_time(
            trace.costs, spec, device, trace.tokens_per_sample, trace.trainable_tensors
        )
        accumulated = step_time(
            trace.costs,
            TrainSpec(**{**kwargs, "grad_accum": n}, device=device.name),
            device,
            trace.tokens_per_sample,
            trace.trainable_tensors,
        )
        grad_bytes = trace.trainable_count * spec.precision.param_dtype.itemsize
        stage = Stage(name="train", epochs=1, step=accumulated)
        run = RunSpec(samples=spec.batch * n, gpus=n)
        many = run_time([stage], spec.batch * n, run, device, grad_bytes).step_seconds
        m1, m2 = one["cases"][name]["median"], two["cases"][name]["median"]
        print(
            f"| {name} | {m1 * 1000:.1f} / {step.seconds * 1000:.1f} "
            f"| {m2 * 1000:.1f} / {many * 1000:.1f} "
            f"| {(m2 - m1) * 1000:+.1f} / {(many - step.seconds) * 1000:+.1f} |"
        )


if __name__ == "__main__":
    main()
