"""Predicted against measured step time of the accuracy suite on one GPU.

    PYTHONPATH=src:. python -m benchmarks.timing.compare \
        benchmarks/timing/results/timing_h100.json > benchmarks/timing/results/timing_h100.md

Each case is traced on this machine (no GPU) and its step time modelled for the catalog row of
the measured card. benchmarks/timing/calibrate.py reads single-kernel measurements only; the
host floor (`src/trainfit/timing/host_fit.json`) was fitted later on this table's cases and the
faithful ones (benchmarks/steptime/hostfit.py), so this table is calibration data for it.
`timing_heldout_h100.json` holds steps chosen after the model was finished
(benchmarks/timing/heldout.py), which steered nothing (nor the host floor's fit).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

from benchmarks.accuracy.cases import CASES
from benchmarks.timing.heldout import HELDOUT
from trainfit.hardware.catalog import Device, get_device
from trainfit.spec import TrainSpec
from trainfit.timing.constants import calibration
from trainfit.timing.step import StepTime, step_time
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target


def predict(name: str, device: Device) -> StepTime:
    """The modelled step time of an accuracy or held-out case on `device`, as these tables
    timed it: one step alone, the device synchronised after it (`synced_loop`)."""
    spec = TrainSpec(**{**CASES, **HELDOUT}[name], device=device.name)
    trace = trace_step(spec, target=Target.of(device))
    return step_time(
        trace.costs,
        spec,
        device,
        trace.tokens_per_sample,
        trace.trainable_tensors,
        synced_loop=True,
    )


def main() -> None:
    measured = json.loads(Path(sys.argv[1]).read_text())
    cases = {**CASES, **HELDOUT}
    env = measured["environment"]
    device = get_device("h100")
    cal = calibration()
    rows = []
    errors = []
    for name, record in measured["cases"].items():
        spec = TrainSpec(**cases[name], device=device.name)
        started = time.perf_counter()
        predicted = predict(name, device)
        took = time.perf_counter() - started
        real = record["median_step_seconds"]
        accum = spec.grad_accum  # the measured phases sum every micro-batch
        fwd = statistics.median(record["forward_seconds"])
        bwd = statistics.median(record["backward_seconds"])
        opt = statistics.median(record["optimizer_seconds"])
        error = predicted.seconds / real - 1
        errors.append(error)
        rows.append(
            f"| {name} | {real * 1000:.1f} | {predicted.seconds * 1000:.1f} | {error:+.1%} "
            f"| {fwd * 1000:.1f} / {predicted.forward_seconds * accum * 1000:.1f} "
            f"| {bwd * 1000:.1f} / {predicted.backward_seconds * accum * 1000:.1f} "
            f"| {opt * 1000:.1f} / {predicted.optimizer_seconds * 1000:.1f} "
            f"| {predicted.compute_bound_share:.0%} / {predicted.memory_bound_share:.0%} / "
            f"{predicted.host_bound_share:.0%} | {took:.1f} |"
        )
    absolute = sorted(abs(e) for e in errors)
    print(f"# Step time: predicted against measured on one {env['device']}\n")
    print(
        f"Measured {env['date'][:10]} with torch {env['torch']}, CUDA {env['cuda']}, "
        f"cuDNN {env['cudnn']}, transformers {env['transformers']}, driver/card "
        f"`{env['nvidia_smi']}`; 3 warm-up and 10 timed steps per case, the median shown "
        f"(`benchmarks/timing/measure_gpu.py`). Predicted on a CPU-only machine from the traced "
        f"step with the constants of `src/trainfit/timing/calibration.json` ({cal.source}), "
        "none of them read off these cases, and the host floor of "
        "`src/trainfit/timing/host_fit.json`, fitted on the accuracy suite's cases (this "
        "table's `timing_h100`), the faithful cases and the loop-timed steps of "
        "`benchmarks/steptime` (`benchmarks/steptime/hostfit.py`); the held-out steps "
        "(`timing_heldout_h100`) were not used in any fit. The steps were timed with a sync "
        "after each, so the model's synced step is shown (`step_time(..., synced_loop=True)`; "
        "trainfit's own figures are a loop's steady period).\n"
    )
    print(f"Predicted with torch {torch.__version__}, transformers {transformers.__version__}.\n")
    print(
        f"**{len(errors)} cases: median |error| {statistics.median(absolute):.1%}, "
        f"max {absolute[-1]:.1%}; within 15%: {sum(a <= 0.15 for a in absolute)}, "
        f"within 35%: {sum(a <= 0.35 for a in absolute)}.**\n"
    )
    print(
        "| case | measured ms | predicted ms | error | forward ms, all micro-batches "
        "(meas / pred) | backward ms | optimizer ms | compute / memory / host-bound | trace s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
