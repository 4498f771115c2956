"""trainfit's step-time predictions for a case set, written before its first run.

    PYTHONPATH=src:. python -m benchmarks.steptime.predict [--set heldout|blind|blind2|...]

Writes the set's `results/<set>_predictions.json` (`heldout`: `results/heldout_predictions.json`,
the cases of `cases.py`; each other set's cases in its `<set>_cases.py`, `cases.SETS`), to be
committed before the GPU measures the cases; `compare.py`, `compare_window.py` and
`machines.py` read them, never recomputed figures.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import torch
import transformers

import trainfit
from benchmarks.steptime.cases import CASES, SETS, case_set
from trainfit.spec import LoraSpec

RESULTS = Path(__file__).parent / "results"
PREDICTIONS = RESULTS / "heldout_predictions.json"
PREDICTION_FILES = {
    name: PREDICTIONS if name == "heldout" else RESULTS / f"{name}_predictions.json"
    for name in SETS
}
"""Each case set's committed predictions (`results/<set>_predictions.json`)."""


def spec_kwargs(name: str, cases: dict[str, dict[str, Any]] = CASES) -> dict[str, Any]:
    kwargs = dict(cases[name]["spec"])
    if "lora" in kwargs:
        kwargs["lora"] = LoraSpec(**kwargs["lora"])
    return kwargs


def predict(name: str, cases: dict[str, dict[str, Any]] = CASES) -> dict[str, Any]:
    est = trainfit.estimate(device="h100", **spec_kwargs(name, cases))
    step = est.step_time
    assert step is not None, f"{name}: no step time"
    return {
        "step_seconds": step.seconds,
        "host_bound_share": step.host_bound_share,
        "forward_seconds": step.forward_seconds,
        "backward_seconds": step.backward_seconds,
        "optimizer_seconds": step.optimizer_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", default="heldout", choices=tuple(PREDICTION_FILES))
    args = parser.parse_args()
    cases = case_set(args.set)
    out = PREDICTION_FILES[args.set]
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    record = {
        "predicted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rules_at": commit,
        "device": "h100",
        "versions": {
            "trainfit": importlib.metadata.version("trainfit"),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "cases": {name: predict(name, cases) for name in cases},
    }
    RESULTS.mkdir(exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    for name, p in record["cases"].items():
        print(f"{name}: {p['step_seconds'] * 1000:.2f} ms (host-bound {p['host_bound_share']:.0%})")


if __name__ == "__main__":
    main()
