"""A step's device time by kind of kernel: trainfit's roofline against torch.profiler's.

    # on the GPU: profile the cases of a set (each 5 warm-up steps, then 3 profiled)
    PYTHONPATH=src:. python -m benchmarks.steptime.kinds --profile --set blind8 \
        --cases a,b --out DIR
    # here: the table, each kind's predicted and profiled device milliseconds a step
    PYTHONPATH=src:. python -m benchmarks.steptime.kinds --set blind8 DIR/kinds.json

For the device-bound misses of a blind set: which kind of kernel (convolution, matmul,
normalisation, the rest) the model under- or over-times. The profile groups each aten op's own
device time (`self_device_time_total`, aten ops only: the profile lists each kernel as well) by
its name; the prediction groups each traced op's
modelled device time (`trainfit.timing.step.Rates.time`, before any host bound) by its kind, the
forward and backward `grad_accum` times a step.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import case_set

KINDS = ("conv", "matmul", "attention", "norm", "rnn", "foreach", "memory")
_NAMES = (
    ("conv", ("conv",)),
    ("attention", ("scaled_dot_product", "flash", "efficient_attention", "cudnn_attention")),
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")),
    ("norm", ("batch_norm",)),
    ("rnn", ("rnn", "lstm", "gru")),
    ("foreach", ("_foreach", "_fused_")),
)


def kind_of(op_name: str) -> str:
    """The kind an aten op's kernels count under, by its name."""
    low = op_name.lower()
    for kind, marks in _NAMES:
        if any(mark in low for mark in marks):
            return kind
    return "memory"


def profile(name: str, build: dict[str, Any], steps: int = 3) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from benchmarks.steptime.measure_gpu import make_step

    _, step = make_step(build)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    ops: dict[str, float] = {}
    for event in prof.key_averages():
        device_us = getattr(event, "self_device_time_total", 0) or 0
        if device_us > 0:
            ops[event.key] = device_us / steps / 1e3
    kernels: dict[str, float] = {}
    for event in prof.events():
        if event.device_type.name == "CUDA":
            short = event.name[:120]
            kernels[short] = kernels.get(short, 0.0) + event.device_time / steps / 1e3
    top = dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:40])
    return {"case": name, "ops_ms": ops, "top_kernels_ms": top}


def predicted(spec_kwargs: dict[str, Any]) -> dict[str, float]:
    """Each kind's modelled device milliseconds in one step of the spec on the H100."""
    from trainfit.hardware.catalog import get_device
    from trainfit.spec import TrainSpec
    from trainfit.timing.constants import calibration
    from trainfit.timing.step import Rates
    from trainfit.trace.costs import OpKind, Phase
    from trainfit.trace.step import trace_step

    spec = TrainSpec(**spec_kwargs)
    costs = trace_step(spec).costs
    rates = Rates(get_device("h100"), spec, calibration())
    out = dict.fromkeys(KINDS, 0.0)
    accum = spec.grad_accum
    for phase, times in ((Phase.FORWARD, accum), (Phase.BACKWARD, accum), (Phase.OPTIMIZER, 1)):
        for op in costs.ops(phase):
            if op.kind not in (OpKind.HOST, OpKind.SYNC, OpKind.MODULE):
                out[op.kind.value] += rates.time(op, phase).seconds * times * 1e3
    return out


def table(record: dict[str, Any], set_name: str) -> list[str]:
    from benchmarks.steptime.predict import spec_kwargs

    cases = case_set(set_name)
    lines = [
        "| case | kind | predicted ms | profiled ms | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for row in record["cases"]:
        name = row["case"]
        measured = dict.fromkeys(KINDS, 0.0)
        for op, ms in row["ops_ms"].items():
            if op.startswith("aten::"):  # NB: key_averages lists the kernels themselves too
                measured[kind_of(op)] += ms
        guess = predicted(spec_kwargs(name, cases))
        for kind in KINDS:
            if guess[kind] or measured[kind]:
                ratio = f"{guess[kind] / measured[kind]:.2f}" if measured[kind] else "-"
                lines.append(
                    f"| {name} | {kind} | {guess[kind]:.3f} | {measured[kind]:.3f} | {ratio} |"
                )
        total_p, total_m = sum(guess.values()), sum(measured.values())
        lines.append(
            f"| {name} | **all** | {total_p:.3f} | {total_m:.3f} | {total_p / total_m:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("record", nargs="?", type=Path)
    parser.add_argument("--set", default="blind8")
    parser.add_argument("--cases", default="")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.profile:
        import torch

        cases = case_set(args.set)
        names = [n for n in args.cases.split(",") if n] or list(cases)
        record = {
            "set": args.set,
            "device": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "cases": [],
        }
        args.out.mkdir(parents=True, exist_ok=True)
        for name in names:
            record["cases"].append(profile(name, cases[name]["build"]))
            (args.out / "kinds.json").write_text(json.dumps(record, indent=1) + "\n")
            print(name, "profiled", flush=True)
        return
    print("\n".join(table(json.loads(args.record.read_text()), args.set)))


if __name__ == "__main__":
    main()
