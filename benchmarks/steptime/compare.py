"""The held-out step-time cases: the H100's runs against the committed predictions.

    PYTHONPATH=src:. python -m benchmarks.steptime.compare results/heldout_h100.json \
        > results/heldout_h100.md

Reads the predictions committed before the first run (`results/heldout_predictions.json`),
never recomputed ones. Per case: each run's median step, their median (the truth), the error
of the prediction against it, and the run-to-run spread (max / min - 1 of the runs), the
noise the error is to be read beside.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.steptime.predict import PREDICTIONS


def measured_runs(record: dict[str, Any]) -> dict[str, list[float]]:
    """case -> the median step seconds of each of its runs (failed runs left out)."""
    runs: dict[str, list[float]] = {}
    for run in record["runs"]:
        if run.get("median_timed_step_seconds"):
            runs.setdefault(run["case"], []).append(run["median_timed_step_seconds"])
    return runs


def rows(record: dict[str, Any], predictions: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, runs in measured_runs(record).items():
        truth = statistics.median(runs)
        predicted = predictions["cases"][name]["step_seconds"]
        out.append(
            {
                "case": name,
                "runs": runs,
                "measured": truth,
                "predicted": predicted,
                "error": predicted / truth - 1,
                "spread": max(runs) / min(runs) - 1,
                "host_bound_share": predictions["cases"][name]["host_bound_share"],
            }
        )
    return out


def main() -> None:
    record = json.loads(Path(sys.argv[1]).read_text())
    predictions = json.loads(PREDICTIONS.read_text())
    env = record["environment"]
    table = rows(record, predictions)
    errors = sorted(abs(r["error"]) for r in table)
    spreads = sorted(r["spread"] for r in table)
    print("# Held-out step times: the H100 against trainfit's committed predictions\n")
    print(
        f"Measured {env['date'][:10]} on {env['device']} (`{env['nvidia_smi']}`; host CPU "
        f"{env.get('cpu')}), torch {env['torch']} (CUDA {env['cuda']}, cuDNN {env['cudnn']}), "
        f"transformers {env['transformers']}, peft {env['peft']}, Python {env['python']}; each "
        "case in a fresh process per run (`benchmarks/steptime/measure_gpu.py`): the device "
        "synchronised around each step, 5 untimed steps, the median of 30 timed ones per run; "
        "the truth is the median of the runs.\n"
    )
    v = predictions["versions"]
    print(
        f"Predicted {predictions['predicted'][:10]} on a CPU-only machine before any run "
        f"(`results/heldout_predictions.json`; trainfit {v['trainfit']}, rules at "
        f"{predictions['rules_at'][:10]}, torch {v['torch']}, transformers "
        f"{v['transformers']}), device {predictions['device']}.\n"
    )
    print(
        f"**{len(table)} cases: median |error| {statistics.median(errors):.1%}, worst "
        f"{errors[-1]:.1%}; run-to-run spread median {statistics.median(spreads):.1%}, worst "
        f"{spreads[-1]:.1%}.**\n"
    )
    print(
        "| case | step ms (runs) | measured ms | trainfit ms | error | run spread "
        "| host-bound (pred) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in table:
        runs = ", ".join(f"{s * 1000:.2f}" for s in r["runs"])
        print(
            f"| {r['case']} | {runs} | {r['measured'] * 1000:.2f} | {r['predicted'] * 1000:.2f} "
            f"| {r['error']:+.1%} | {r['spread']:.1%} | {r['host_bound_share']:.0%} |"
        )


if __name__ == "__main__":
    main()
