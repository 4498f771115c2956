"""Cases of several sets, each run in a fresh process of a study's module: the command line
and the loop that `stalls.py` and `blocking.py` share."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import case_set
from benchmarks.steptime.measure_gpu import _environment, child_row


def run_cases(module: str, cases: str, steps: int, deadline: float, out: Path) -> None:
    """Run `python -m module --one SET:CASE --steps N` for each of `cases` (comma-separated
    `set:case`), each in a fresh process, within `deadline` seconds; write `out` (the
    environment, the settings and one record per case: the child's last stdout line, read as
    JSON, or its error) after every case."""
    started = time.perf_counter()
    record: dict[str, Any] = {
        "environment": _environment(),
        "settings": {"steps": steps, "cases": cases},
        "runs": [],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    for item in cases.split(","):
        left = deadline - (time.perf_counter() - started)
        if left < 20:
            record["runs"].append({"case": item, "error": "deadline"})
            continue
        cmd = [sys.executable, "-m", module, "--one", item, "--steps", str(steps)]
        row = child_row(cmd, item, min(left, 120))
        record["runs"].append(row)
        print(item, row.get("error", "ok"), flush=True)
        out.write_text(json.dumps(record, indent=1) + "\n")


def study_main(
    module: str,
    key: str,
    run_one: Callable[[dict[str, Any], int], Any],
    report: Callable[[Path], None],
    steps: int,
    deadline: float,
) -> None:
    """A study's command line: `--one SET:CASE` runs one case here (its record's `key` is what
    `run_one(build, steps)` returns), `--out DIR` runs `--cases` each in a fresh process into
    DIR/<module's name>.json (`run_cases`), and a record file alone prints its table (`report`)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("record", nargs="?", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default="", help="set:case,set:case,...")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--deadline", type=float, default=deadline)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        set_name, name = args.one.split(":")
        print(
            json.dumps(
                {"case": args.one, key: run_one(case_set(set_name)[name]["build"], args.steps)}
            )
        )
        return
    if args.out is None:
        report(args.record)
        return
    out = args.out / f"{module.rsplit('.', 1)[-1]}.json"
    run_cases(module, args.cases, args.steps, args.deadline, out)
