"""Time the accuracy suite's training steps on a real CUDA GPU.

    PYTHONPATH=src:. python -m benchmarks.timing.measure_gpu --out DIR [--cases a,b]

Each case (benchmarks/accuracy/cases.py) runs 3 warm-up and 10 timed optimizer steps in this
process (`trainfit.measure.runner.time_cuda`: the model built on the card, PyTorch's defaults,
the device synchronised after each step, CUDA events at the phase marks). Writes
DIR/timing.json incrementally: the environment and, per case, the step times or the error.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.accuracy.cases import CASES
from benchmarks.timing.heldout import HELDOUT


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", default="")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--heldout", action="store_true", help="the held-out set (heldout.py)")
    args = parser.parse_args()
    import torch

    from benchmarks.accuracy.measure_gpu import _environment
    from trainfit.measure.runner import time_cuda
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
            timing = time_cuda(TrainSpec(**cases[name]), warmup=3, steps=args.steps)
            result["cases"][name] = timing.to_dict()
            print(
                f"{name}: {timing.median_step_seconds * 1000:.1f} ms/step "
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
