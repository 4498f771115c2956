"""Estimate every CPU accuracy case for the `cpu` target and compare with the measurements.

    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.compare     # writes results/

Writes results/estimates_cpu.json (recomputed by tests/test_accuracy_table_cpu.py) and
results/accuracy_cpu.md (the table). error = estimate / measured - 1.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.accuracy.compare import cpu_environment
from benchmarks.accuracy_cpu.cases import CASES, FIT
from trainfit import TrainSpec, estimate
from trainfit.report.estimate import estimate_dict

RESULTS = Path(__file__).parent / "results"
MEASURED = RESULTS / "measured_cpu.json"
ESTIMATES = RESULTS / "estimates_cpu.json"
TABLE = RESULTS / "accuracy_cpu.md"
MiB = 1 << 20


def compute() -> dict[str, Any]:
    """Estimate every case; return the record committed as estimates_cpu.json."""

    records: dict[str, Any] = {}
    for name, kwargs in CASES.items():
        started = time.perf_counter()
        result = estimate(TrainSpec(**kwargs, device="cpu"))
        data = estimate_dict(result)
        records[name] = {
            "device_memory_needed_bytes": result.device_memory_needed_bytes,
            "peak_allocated_bytes": result.peak_allocated_bytes,
            "peak_reserved_bytes": result.peak_reserved_bytes,
            "breakdown": data["breakdown"],
            "peak": data["peak"],
            "parameters": result.parameter_count,
            "seconds": round(time.perf_counter() - started, 2),
        }
        print(f"{name}: {result.device_memory_needed_bytes / MiB:.1f} MiB", flush=True)
    return {
        "environment": cpu_environment(),
        "cases": records,
    }


def _error(estimated: int, measured: int) -> float:
    return estimated / measured - 1


def _summary(values: list[float]) -> str:
    absolute = [abs(v) for v in values]
    return f"median |error| {statistics.median(absolute):.1%}, max {max(absolute):.1%}"


def table(estimates: dict[str, Any], measured: dict[str, Any]) -> str:
    """The Markdown accuracy table."""
    env = measured["environment"]
    lines = [
        "# Accuracy on the CPU (this machine)",
        "",
        f"Measured {env['date']} on {env['cpu']} ({env['host']}, {env['threads']} torch "
        f"threads, {env['ram_bytes'] / 2**30:.0f} GiB RAM, {env['libc']}), torch "
        f"{env['torch']}, transformers {env['transformers']}, Python {env['python']}; three "
        "steps per case in a fresh process (`benchmarks/accuracy_cpu/measure_cpu.py`).",
        "",
        "*RSS* is the CPU's memory needed: the peak increase of the process's resident set "
        "over its RSS just before the model is built (imports done), read from the kernel's "
        "high-water mark, reset at every phase boundary. *Allocated* is the peak of the CPU "
        "allocator's live bytes (PyTorch profiler, separate process). The estimate is the "
        "glibc malloc replay of the traced step plus the runtime constant; error = estimate / "
        "measured - 1. Cases marked *fit* set the runtime constant; all others are held out.",
        "",
        "| case | measured RSS MiB | estimated MiB | RSS error | measured allocated MiB "
        "| allocated error | RSS - allocated, measured MiB | peak phase (estimated) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    rss_errors: list[float] = []
    held_out: list[float] = []
    alloc_errors: list[float] = []
    for name, est in estimates["cases"].items():
        meas = measured["cases"].get(name)
        if meas is None:
            continue
        r = _error(est["device_memory_needed_bytes"], meas["peak_rss_increase_bytes"])
        a = _error(est["peak_allocated_bytes"], meas["peak_allocated_bytes"])
        rss_errors.append(r)
        alloc_errors.append(a)
        if name not in FIT:
            held_out.append(r)
        label = f"{name} *fit*" if name in FIT else name
        gap = meas["peak_rss_increase_bytes"] - meas["peak_allocated_bytes"]
        lines.append(
            f"| {label} | {meas['peak_rss_increase_bytes'] / MiB:.1f} | "
            f"{est['device_memory_needed_bytes'] / MiB:.1f} | {r:+.1%} | "
            f"{meas['peak_allocated_bytes'] / MiB:.1f} | {a:+.2%} | {gap / MiB:.1f} | "
            f"{est['peak']['phase']} ({est['peak']['iteration']}) |"
        )
    lines += [
        "",
        f"**RSS increase, all {len(rss_errors)} cases:** {_summary(rss_errors)}.  ",
        f"**Held-out cases only ({len(held_out)}):** {_summary(held_out)}.  ",
        f"**Peak allocated:** {_summary(alloc_errors)}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    fresh = compute()
    RESULTS.mkdir(exist_ok=True)
    ESTIMATES.write_text(json.dumps(fresh, indent=1) + "\n")
    if MEASURED.exists():
        TABLE.write_text(table(fresh, json.loads(MEASURED.read_text())))
        print(TABLE.read_text())


if __name__ == "__main__":
    main()
