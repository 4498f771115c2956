"""Where a host-bound step's host time goes, by phase, against the model's host side: for the
blind sets' misses that the model calls device-bound or under-times on the host.

    # on the GPU: DIR/phases.json
    PYTHONPATH=src:. python -m benchmarks.steptime.phases --profile --out DIR \
        --cases blind13:gru-h256-1l-b64-t128-bf16,blind13:vq-bf16-b16-x8
    # here: each case's measured and modelled host milliseconds by phase
    PYTHONPATH=src:. python -m benchmarks.steptime.phases DIR/phases.json

On the GPU each case is built as `window.py` builds it (`measure_gpu._model`, the case's
optimizer on its path by `measure_gpu.optimizer_for`, autocast where the case asks; cases with
gradient accumulation, a GradScaler or a preference loss are refused) and run in one process: 5
warm-up steps, then 30 steps that never synchronise, the host's `time.perf_counter` read
between the forward (and loss), the backward and the optimizer (step and zero_grad); a phase's
figure is its median over the 30. In a host-bound loop the device never holds the host up, so
each is the host's time to issue that phase; the loop's period is beside them.

Here, the model's host side of the same phases: `timing.host.step_host_costs` summed over the
traced forward and backward, and the optimizer's calibrated host cost
(`Calibration.optimizer_host`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import case_set


def measure_case(build: dict[str, Any], steps: int = 30) -> dict[str, Any]:
    import torch

    from benchmarks.steptime.measure_gpu import _model, half_of, optimizer_for

    half = half_of(build)
    if build.get("accum", 1) != 1 or half == "fp16" or build.get("dpo"):
        raise ValueError("phases.py times single micro-batch steps without a GradScaler or DPO")
    model, loss_fn = _model(build)
    optimizer = optimizer_for(build, [p for p in model.parameters() if p.requires_grad])
    model.train()
    marks: list[tuple[float, float, float]] = []

    def step() -> None:
        started = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=half is not None):
            loss = loss_fn()
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        marks.append((forward - started, backward - forward, time.perf_counter() - backward))

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    marks.clear()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return {
        "period_ms": (time.perf_counter() - started) / steps * 1e3,
        "forward_host_ms": statistics.median(m[0] for m in marks) * 1e3,
        "backward_host_ms": statistics.median(m[1] for m in marks) * 1e3,
        "optimizer_host_ms": statistics.median(m[2] for m in marks) * 1e3,
    }


def modelled(set_name: str, name: str) -> dict[str, float]:
    """The model's host milliseconds of the case's forward, backward and optimizer on the
    H100, and its step time."""
    from benchmarks.steptime.predict import spec_kwargs
    from trainfit.hardware.catalog import get_device
    from trainfit.optim import run_path
    from trainfit.spec import TrainSpec
    from trainfit.timing.constants import calibration
    from trainfit.timing.host import step_host_costs
    from trainfit.timing.step import step_time
    from trainfit.trace.step import trace_step
    from trainfit.trace.target import Target
    from trainfit.training import Phase

    spec = TrainSpec(**spec_kwargs(name, case_set(set_name)))
    device = get_device("h100")
    trace = trace_step(spec, target=Target.of(device))
    cal = calibration()
    out = {
        f"{phase.value}_host_ms": sum(step_host_costs(cal, trace.costs.ops(phase), phase, 0.0))
        * 1e3
        for phase in (Phase.FORWARD, Phase.BACKWARD)
    }
    path = run_path(spec.optimizer, spec.optimizer_path, Target.of(device).rules(None).foreach)
    out["optimizer_host_ms"] = cal.optimizer_host(spec, trace.trainable_tensors, path) * 1e3
    step = step_time(trace.costs, spec, device, trace.tokens_per_sample, trace.trainable_tensors)
    out["period_ms"] = step.seconds * 1e3
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("record", nargs="?", type=Path)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--cases", default="")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.profile:
        args.out.mkdir(parents=True, exist_ok=True)
        rows = []
        for item in args.cases.split(","):
            set_name, name = item.split(":")
            row = measure_case(case_set(set_name)[name]["build"])
            rows.append({"set": set_name, "case": name, **row})
            (args.out / "phases.json").write_text(json.dumps(rows, indent=1) + "\n")
            print(name, row, flush=True)
        return
    keys = ("forward_host_ms", "backward_host_ms", "optimizer_host_ms", "period_ms")
    print("| case | forward host ms | backward host ms | optimizer host ms | period ms |")
    print("|---|---:|---:|---:|---:|")
    for row in json.loads(args.record.read_text()):
        model = modelled(row["set"], row["case"])
        cells = " | ".join(f"{model[k]:.2f} / {row[k]:.2f}" for k in keys)
        print(f"| {row['set']}/{row['case']} (model / measured) | {cells} |")


if __name__ == "__main__":
    main()
