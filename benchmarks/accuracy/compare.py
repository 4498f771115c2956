"""Estimate every accuracy case on this CPU and compare with the committed GPU measurements.

    PYTHONPATH=src:. python -m benchmarks.accuracy.compare            # writes results/
    PYTHONPATH=src:. python -m benchmarks.accuracy.compare --check    # exit 1 if estimates drift

Writes results/estimates.json (the estimates, recomputed by a CI test) and
results/accuracy_h100.md (the published table). error = estimate / measured - 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.accuracy.cases import CASES, FIT
from trainfit import TrainSpec, estimate
from trainfit.measure.compare import component_totals
from trainfit.report.estimate import estimate_dict

RESULTS = Path(__file__).parent / "results"
MEASURED = RESULTS / "measured_h100.json"
ESTIMATES = RESULTS / "estimates.json"
TABLE = RESULTS / "accuracy_h100.md"
GiB = 1 << 30
BREAKDOWN_CASES = ("gpt2-bf16", "resnet50-fp32", "tinyllama-bf16", "vit-base-frozen-bf16")


def compute() -> dict[str, Any]:
    """Estimate every case; return the record committed as estimates.json."""

    records: dict[str, Any] = {}
    for name, kwargs in CASES.items():
        spec = TrainSpec(**kwargs)
        started = time.perf_counter()
        result = estimate(spec)
        record = {
            "device_memory_needed_bytes": result.device_memory_needed_bytes,
            "peak_allocated_bytes": result.peak_allocated_bytes,
            "peak_reserved_bytes": result.peak_reserved_bytes,
            "breakdown": estimate_dict(result)["breakdown"],
            "peak": estimate_dict(result)["peak"],
            "parameters": result.parameter_count,
            "trainable_parameters": result.trainable_parameter_count,
            "seconds": round(time.perf_counter() - started, 2),
        }
        if name in BREAKDOWN_CASES:
            record["category_totals"] = component_totals(spec, result.breakdown.workspaces // 2)
        records[name] = record
        print(
            f"{name}: {result.device_memory_needed_bytes / GiB:.3f} GiB ({record['seconds']:.1f}s)",
            flush=True,
        )
    return {
        "environment": cpu_environment(),
        "cases": records,
    }


def cpu_environment() -> dict[str, str]:
    """Date, host and versions of a CPU-side estimate run."""
    import transformers

    return {
        "date": datetime.date.today().isoformat(),
        "host": f"{platform.system()} {platform.machine()}, CPU only",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def _error(estimated: int, measured: int) -> float:
    return estimated / measured - 1


def table(estimates: dict[str, Any], measured: dict[str, Any]) -> str:
    """The Markdown accuracy table."""
    env = measured["environment"]
    est_env = estimates["environment"]
    lines = [
        "# Accuracy on an NVIDIA H100 80GB HBM3",
        "",
        f"Measured {env['date'][:10]} on {env['device']} (driver "
        f"{env['nvidia_smi'].split(',')[1].strip()}), torch {env['torch']} (CUDA {env['cuda']}, "
        f"cuDNN {env['cudnn']}), transformers {env['transformers']}, Python {env['python']}; "
        "three AdamW-or-given-optimizer steps per case in a fresh process, allocator defaults, "
        "no `empty_cache` (`benchmarks/accuracy/measure_gpu.py`).",
        "",
        f"Estimated {est_env['date']} on {est_env['host']} with torch {est_env['torch']}, "
        f"transformers {est_env['transformers']} (`benchmarks/accuracy/compare.py`).",
        "",
        "error = estimate / measured - 1. *Device* is what the card must hold: measured as "
        "total - free after the steps; estimated as peak reserved + runtime context. "
        "16 B/param is the rule of thumb accelerate's estimate-memory also follows "
        "(weights, gradients, Adam state; no activations). Cases marked *fit* are the only ones "
        "whose GPU data set a constant (the runtime context, cuDNN's dropout-state size); all "
        "others are held out.",
        "",
        "| case | measured device GiB | estimated GiB | device error | allocated error "
        "| reserved error | 16 B/param error | peak phase |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    device_errors: list[float] = []
    held_out: list[float] = []
    rule_errors: list[float] = []
    for name, est in estimates["cases"].items():
        meas = measured["cases"].get(name)
        if meas is None:
            continue
        d = _error(est["device_memory_needed_bytes"], meas["device_used_bytes"])
        a = _error(est["peak_allocated_bytes"], meas["peak_allocated_bytes"])
        r = _error(est["peak_reserved_bytes"], meas["peak_reserved_bytes"])
        rule = _error(16 * est["parameters"], meas["device_used_bytes"])
        device_errors.append(d)
        rule_errors.append(rule)
        if name not in FIT:
            held_out.append(d)
        label = f"{name} *fit*" if name in FIT else name
        lines.append(
            f"| {label} | {meas['device_used_bytes'] / GiB:.2f} | "
            f"{est['device_memory_needed_bytes'] / GiB:.2f} | {d:+.1%} | {a:+.1%} | {r:+.1%} | "
            f"{rule:+.0%} | {est['peak']['phase']} ({est['peak']['iteration']}) |"
        )

    def summary(values: list[float]) -> str:
        absolute = [abs(v) for v in values]
        return f"median |error| {statistics.median(absolute):.1%}, max {max(absolute):.1%}"

    lines += [
        "",
        f"**Device memory needed, all {len(device_errors)} cases:** {summary(device_errors)}.  ",
        f"**Held-out cases only ({len(held_out)}):** {summary(held_out)}.  ",
        f"**16 bytes per parameter:** {summary(rule_errors)}.",
        "",
        "## Breakdown against a category-tagged measurement",
        "",
        "The GPU runner records parameter bytes, gradient bytes after the first backward, "
        "optimizer-state bytes, and what the first forward kept (allocated after it minus "
        "before it, the loss and the forward's cuBLAS workspace included); the trace gives "
        "the same four quantities.",
        "",
        "| case | component | measured MiB | estimated MiB | error |",
        "|---|---|---:|---:|---:|",
    ]
    keys = {
        "parameters": "parameter_bytes",
        "gradients": "gradient_bytes",
        "optimizer_state": "optimizer_state_bytes",
        "activations": "activation_bytes",
    }
    for name in BREAKDOWN_CASES:
        est = estimates["cases"].get(name, {}).get("category_totals")
        meas = measured["cases"].get(name)
        if not est or not meas:
            continue
        for key, measured_key in keys.items():
            m = meas[measured_key]
            e = est[key]
            err = f"{_error(e, m):+.1%}" if m else "n/a"
            lines.append(f"| {name} | {key} | {m / 2**20:.1f} | {e / 2**20:.1f} | {err} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="fail if estimates drift")
    args = parser.parse_args()
    fresh = compute()
    measured = json.loads(MEASURED.read_text())
    if args.check:
        committed = json.loads(ESTIMATES.read_text())["cases"]
        drift = [
            name
            for name, rec in fresh["cases"].items()
            if committed.get(name, {}).get("device_memory_needed_bytes")
            != rec["device_memory_needed_bytes"]
        ]
        if drift:
            print(f"estimates drifted from the committed table: {', '.join(drift)}")
            sys.exit(1)
        return
    ESTIMATES.write_text(json.dumps(fresh, indent=1) + "\n")
    TABLE.write_text(table(fresh, measured))
    print(TABLE.read_text())


if __name__ == "__main__":
    main()
