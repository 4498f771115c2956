"""Speed against a baseline revision, measured in the same run: the CLI's catalog estimate of a
1.1B model and `plan()` of a 7B Llama shape over ten devices, each in fresh processes, the
baseline's and this tree's runs alternating (the machine is shared: only the ratio means much).

    PYTHONPATH=src:. python -m benchmarks.speed.bench_against --baseline REV [--rounds 3]

The baseline's `src/` is taken from git (`git archive REV src`); both trees run with the same
Python and packages. Each pair's outputs are compared (the estimate's JSON without its elapsed
seconds, the plan's JSON): the speed-ups must leave every figure as it was. Rows are appended
to results.md and plan_results.md beside this file; measured rows are never overwritten.

Targets (issue: the front door): the catalog 1.1B estimate in <= 3 s wall, the 7B plan over
ten devices in <= 8 s, on the 2-core machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
ESTIMATE = ["-m", "trainfit", "estimate", "tinyllama-1.1b", "--json"]
PLAN = """
import json, sys, tempfile, time
from pathlib import Path
import transformers
from benchmarks.speed.bench_estimate import LLAMA_7B
from benchmarks.speed.bench_plan import DEVICES
from trainfit import TrainSpec, estimate
from trainfit.plan.search import plan
from trainfit.plan.words import plan_dict
folder = Path(tempfile.mkdtemp()) / "llama7b"
transformers.LlamaConfig(**LLAMA_7B).save_pretrained(folder)
estimate(TrainSpec(model=str(folder), batch=1, seq_len=64))  # NB: warm the process
started = time.perf_counter()
result = plan(TrainSpec(model=str(folder), seq_len=1024), 32, DEVICES, jobs=int(sys.argv[1]))
seconds = time.perf_counter() - started
text = json.dumps(plan_dict(result), sort_keys=True).replace(str(folder), "MODEL")
print(json.dumps({"seconds": seconds, "plan": text}))
"""


def _baseline(revision: str, into: Path) -> Path:
    """The baseline's src/ under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}


def _estimate(src: Path) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *ESTIMATE], capture_output=True, check=True, env=_env(src), text=True
    ).stdout
    seconds = time.perf_counter() - started
    data = json.loads(out)
    data.pop("seconds")  # NB: the elapsed time, not a figure
    return seconds, json.dumps(data, sort_keys=True)


def _plan(src: Path, jobs: int) -> tuple[float, str]:
    out = subprocess.run(
        [sys.executable, "-c", PLAN, str(jobs)],
        capture_output=True,
        check=True,
        env=_env(src),
        text=True,
        cwd=ROOT,
    ).stdout
    data = json.loads(out.splitlines()[-1])
    return data["seconds"], data["plan"]


def _row(label: str, base: list[float], new: list[float], same: bool) -> str:
    b, n = statistics.median(base), statistics.median(new)
    return (
        f"| {label} | {b:.1f} ({min(base):.1f}-{max(base):.1f}) | "
        f"{n:.1f} ({min(new):.1f}-{max(new):.1f}) | {n / b:.2f} | {'yes' if same else 'NO'} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="plan processes (the CLI's default)")
    args = parser.parse_args()
    this = ROOT / "src"
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    base_rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.baseline],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    times: dict[str, dict[str, list[float]]] = {"estimate": {}, "plan": {}}
    same = {"estimate": True, "plan": True}
    with tempfile.TemporaryDirectory() as tmp:
        base = _baseline(args.baseline, Path(tmp))
        for _ in range(args.rounds):
            for what, run in (("estimate", _estimate), ("plan", lambda s: _plan(s, args.jobs))):
                outputs = []
                for name, src in (("baseline", base), ("this", this)):
                    seconds, output = run(src)
                    times[what].setdefault(name, []).append(seconds)
                    outputs.append(output)
                same[what] = same[what] and outputs[0] == outputs[1]
    import torch
    import transformers

    head_line = (
        f"{datetime.date.today().isoformat()}, {platform.machine()} with {os.cpu_count()} cores "
        f"(shared: load average {os.getloadavg()[0]:.1f} at the end), torch {torch.__version__}, "
        f"transformers {transformers.__version__}, Python {platform.python_version()}; "
        f"{base_rev} (baseline) against {head} (this tree), {args.rounds} alternating rounds, "
        "median (min-max) seconds; same output: every figure equal."
    )
    table = ["| what | baseline | this | ratio | same output |", "|---|---:|---:|---:|---|"]
    estimate_row = _row(
        "CLI `trainfit estimate tinyllama-1.1b --json`, wall incl. imports",
        times["estimate"]["baseline"],
        times["estimate"]["this"],
        same["estimate"],
    )
    plan_row = _row(
        f"`plan()` 7B Llama shape, 10 devices, jobs={args.jobs}",
        times["plan"]["baseline"],
        times["plan"]["this"],
        same["plan"],
    )
    for name, row in (("results.md", estimate_row), ("plan_results.md", plan_row)):
        text = "\n".join(["", f"## Against {base_rev}", "", head_line, "", *table, row, ""])
        with (HERE / name).open("a", encoding="utf-8") as out:
            out.write(text)
        print(text)


if __name__ == "__main__":
    main()
