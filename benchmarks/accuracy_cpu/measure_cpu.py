"""Measure every CPU accuracy case on this machine, each in a fresh process.

    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.measure_cpu            # all cases
    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.measure_cpu --only gpt2-fp32

Two processes per case: one measures the peak RSS increase (three steps), one the peak of
the CPU allocator's live bytes under the profiler (two steps: the first and a steady one),
whose buffers would inflate RSS. Writes results/measured_cpu.json
(`trainfit.measure.cpu.measure_cpu` documents the method).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.accuracy_cpu.cases import CASES

RESULTS = Path(__file__).parent / "results"
MEASURED = RESULTS / "measured_cpu.json"


def _one(name: str, allocations: bool) -> None:
    """Child process: measure one case, print its record as one JSON line."""
    from trainfit import TrainSpec
    from trainfit.measure.cpu import measure_cpu

    spec = TrainSpec(**CASES[name], device="cpu")
    m = measure_cpu(spec, steps=2 if allocations else 3, allocations=allocations)
    record = asdict(m)
    record["phase_peaks"] = [
        {
            "iteration": p.iteration,
            "phase": p.phase.value,
            "rss_increase_bytes": p.rss_increase_bytes,
        }
        for p in m.phase_peaks
    ]
    print("RESULT " + json.dumps(record), flush=True)


def _run(name: str, allocations: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.accuracy_cpu.measure_cpu", "--child", name]
    if allocations:
        cmd.append("--allocations")
    out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise RuntimeError(f"{name}: no result\n{out.stderr[-2000:]}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--allocations", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only", action="append", default=[], help="measure just these cases")
    args = parser.parse_args()
    if args.child:
        _one(args.child, args.allocations)
        return
    names = args.only or list(CASES)
    record = json.loads(MEASURED.read_text()) if MEASURED.exists() and args.only else {}
    cases = record.get("cases", {})
    env: dict[str, Any] = {}
    for name in names:
        started = time.perf_counter()
        rss = _run(name, allocations=False)
        alloc = _run(name, allocations=True)
        rss["peak_allocated_bytes"] = alloc["peak_allocated_bytes"]
        versions = rss.pop("versions")
        env = {"host": rss["host"], "threads": rss["threads"], **versions}
        cases[name] = rss
        print(
            f"{name}: peak RSS +{rss['peak_rss_increase_bytes'] / 2**20:.1f} MiB, "
            f"allocated {rss['peak_allocated_bytes'] / 2**20:.1f} MiB "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    record = {
        "environment": {
            **record.get("environment", {}),
            **env,
            "cpu": _cpu_model(),
            "ram_bytes": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
            "date": datetime.date.today().isoformat(),
            "method": "trainfit.measure.cpu.measure_cpu: fresh process per case; RSS increase "
            "over the RSS before the model is built; VmHWM reset per phase",
        },
        "cases": cases,
    }
    RESULTS.mkdir(exist_ok=True)
    MEASURED.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
