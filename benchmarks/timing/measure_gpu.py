"""Time the accuracy suite's training steps on a real CUDA GPU.

    PYTHONPATH=src:. python -m benchmarks.timing.measure_gpu --out DIR [--cases a,b]

Each case (benchmarks/accuracy/cases.py) runs 3 warm-up and 10 timed optimizer steps in this
process (`trainfit.measure.steps.measure(..., build_on="device", phase_times=True)`: the model
built on the card, PyTorch's defaults, the device synchronised after each step, CUDA events at
the phase marks). Writes DIR/timing.json incrementally: the environment and, per case, the step
times or the error.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.accuracy.cases import CASES
from benchmarks.timing.heldout import HELDOUT

if TYPE_CHECKING:
    from trainfit.measure.steps import Measured


def timing_record(m: Measured) -> dict[str, Any]:
    """What the results hold of a timed run: the wall time of each timed step (the device
    synchronised at its end) and the device time of its phases (CUDA events at the marks)."""
    return {
        "device_name": m.device_name,
        "warmup": m.warmup,
        "steps": m.steps,
        "step_seconds": list(m.step_seconds),
        "forward_seconds": [p.forward for p in m.phase_seconds],
        "backward_seconds": [p.backward for p in m.phase_seconds],
        "optimizer_seconds": [p.optimizer for p in m.phase_seconds],
        "median_step_seconds": m.median_step_seconds,
        "versions": m.versions,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", default="")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--heldout", action="store_true", help="the held-out set (heldout.py)")
    args = parser.parse_args()
    import torch

    from benchmarks.accuracy.measure_gpu import _environment
    from trainfit.measure.steps import measure
    from trainfit.spec import TrainSpec

    cases = HELDOUT if args.heldout else CASES
    names = [n for n in args.cases.split(",") if n] or list(cases)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"environment": _environment(), "cases": {}, "errors": {}}
    for name in names:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        start = time.perf_counter()
        try:
            spec = TrainSpec(**cases[name])
            timed = measure(
                spec, warmup=3, steps=args.steps, device="cuda", build_on="device", phase_times=True
            )
            result["cases"][name] = timing_record(timed)
            print(
                f"{name}: {result['cases'][name]['median_step_seconds'] * 1000:.1f} ms/step "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
        except Exception as exc:  # a case that fails is recorded, the others still run
            result["errors"][name] = f"{type(exc).__name__}: {exc}"
            print(f"{name}: FAILED {exc}", flush=True)
        gc.collect()
        torch.cuda.empty_cache()
        (out / "timing.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
