"""Predict each case's largest micro-batch on an H100, on the CPU.

    PYTHONPATH=src:. python -m benchmarks.max_batch.predict [--cases a,b]

Writes `results/predicted.json`: per case the predicted maximum (`max_micro_batch`, margin 0,
device "h100"), the device memory needed there and one sample above it, and the budget; plus
the torch and transformers versions and the date. `bisect_gpu.py` starts its search from these.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from pathlib import Path
from typing import Any

from benchmarks.max_batch.cases import CASES, DEVICE

RESULTS = Path(__file__).parent / "results"


def environment() -> dict[str, Any]:
    """Versions and date of this CPU-side computation."""
    import torch
    import transformers

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "device": DEVICE,
        "margin": 0.0,
    }


def predict(name: str) -> dict[str, Any]:
    """The predicted maximum micro-batch of one case."""
    from trainfit import TrainSpec, max_micro_batch

    started = time.perf_counter()
    result = max_micro_batch(TrainSpec(**CASES[name], device=DEVICE), margin=0.0)
    return {
        "spec": CASES[name],
        "predicted_max": result.batch,
        "needed_bytes": result.needed_bytes,
        "next_needed_bytes": result.next_needed_bytes,
        "budget_bytes": result.budget_bytes,
        "replayed_from_batch_scaling": result.exact,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="")
    parser.add_argument("--out", type=Path, default=RESULTS / "predicted.json")
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n] or list(CASES)
    record: dict[str, Any] = {"environment": environment(), "cases": {}}
    for name in names:
        record["cases"][name] = row = predict(name)
        print(
            f"{name}: max {row['predicted_max']} "
            f"({row['needed_bytes'] / 2**30:.2f} GiB; +1: "
            f"{(row['next_needed_bytes'] or 0) / 2**30:.2f} GiB) {row['seconds']}s",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
