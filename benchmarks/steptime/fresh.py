"""Cases of several sets, each run in a fresh process of a study's module: the loop that
`stalls.py` and `blocking.py` share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.measure_gpu import _environment


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
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=min(left, 120), env=os.environ
            )
            row = (
                json.loads(done.stdout.strip().splitlines()[-1])
                if done.returncode == 0
                else {"case": item, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
            )
        except subprocess.TimeoutExpired:
            row = {"case": item, "error": "timeout"}
        record["runs"].append(row)
        print(item, row.get("error", "ok"), flush=True)
        out.write_text(json.dumps(record, indent=1) + "\n")
