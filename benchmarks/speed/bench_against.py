"""Speed against a baseline revision, measured in the same run: the CLI's catalog estimate of a
1.1B model and `plan()` of a 7B Llama shape over ten devices, each in fresh processes, the
baseline's and this tree's runs alternating (the machine is shared: only the ratio means much).

    PYTHONPATH=src:. python -m benchmarks.speed.bench_against --baseline REV [--rounds 3]

The baseline's `src/` is taken from git (`git archive REV src`); both trees run with the same
Python and packages. Each pair's outputs are compared (the estimate's JSON without its elapsed
seconds, the plan's JSON): the speed-ups must leave every figure as it was. Rows are appended
to results.md and plan_results.md beside this file; measured rows are never overwritten.

Traces are kept on disk (`trainfit.trace.store`); each tree runs twice per round: cold (an
empty store folder of its own) and then warm (the store its cold run filled), in the order
baseline cold, this cold, baseline warm, this warm; cold is compared with cold and warm with
warm. (A baseline older than the store runs cold twice.) Neither tree reads the user's own
store. Beside the wall seconds, the user+sys CPU seconds of each command (its worker
processes included) are recorded: they depend less on the other jobs on the machine.

Both trees' modules are compiled to bytecode first (`compileall`), as an installed trainfit's
are: where `PYTHONDONTWRITEBYTECODE` is set (as on the shared machine), every run would
otherwise compile trainfit's modules from source again (about 0.1-0.2 s of CPU per process).

Targets (issue: the front door): the catalog 1.1B estimate in <= 3 s wall, the 7B plan over
ten devices in <= 8 s, on the 2-core machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
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
import json, resource, sys, time
from pathlib import Path
import transformers
import transformers.models.llama.modeling_llama  # NB: imported before the clock starts
from benchmarks.speed.bench_estimate import LLAMA_7B
from benchmarks.speed.bench_plan import DEVICES
from trainfit import TrainSpec, estimate
from trainfit.plan.search import plan
from trainfit.plan.words import plan_dict
folder = Path(sys.argv[2])
if not (folder / "config.json").exists():
    transformers.LlamaConfig(**LLAMA_7B).save_pretrained(folder)
estimate(TrainSpec(model=str(folder), batch=1, seq_len=64))  # NB: warm the process
def cpu():
    used = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in used)
started, cpu_started = time.perf_counter(), cpu()
result = plan(TrainSpec(model=str(folder), seq_len=1024), 32, DEVICES, jobs=int(sys.argv[1]))
seconds, cpu_seconds = time.perf_counter() - started, cpu() - cpu_started
text = json.dumps(plan_dict(result), sort_keys=True).replace(str(folder), "MODEL")
print(json.dumps({"seconds": seconds, "cpu": cpu_seconds, "plan": text}))
"""


def _baseline(revision: str, into: Path) -> Path:
    """The baseline's src/ under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _compile(src: Path) -> None:
    """Bytecode for every module of `src`, as an install writes it."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)


def _env(src: Path, store: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}
    env.pop("TRAINFIT_NO_CACHE", None)
    env["TRAINFIT_CACHE_DIR"] = str(store)
    return env


def _cpu() -> float:
    """User+sys CPU seconds of the finished child processes so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _estimate(src: Path, store: Path) -> tuple[float, float, str]:
    started, cpu = time.perf_counter(), _cpu()
    out = subprocess.run(
        [sys.executable, *ESTIMATE],
        capture_output=True,
        check=True,
        env=_env(src, store),
        text=True,
    ).stdout
    seconds = time.perf_counter() - started
    data = json.loads(out)
    data.pop("seconds")  # NB: the elapsed time, not a figure
    return seconds, _cpu() - cpu, json.dumps(data, sort_keys=True)


def _plan(src: Path, store: Path, jobs: int, folder: Path) -> tuple[float, float, str]:
    """`plan()`'s wall and CPU seconds in a warmed process (its worker's CPU included)."""
    out = subprocess.run(
        [sys.executable, "-c", PLAN, str(jobs), str(folder)],
        capture_output=True,
        check=True,
        env=_env(src, store),
        text=True,
        cwd=ROOT,
    ).stdout
    data = json.loads(out.splitlines()[-1])
    return data["seconds"], data["cpu"], data["plan"]


def _cell(values: list[float]) -> str:
    # NB: two decimals: the estimate's target (3 s) is within a tenth of its figures
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def _row(label: str, base: list[float], new: list[float], same: bool) -> str:
    ratio = statistics.median(new) / statistics.median(base)
    return f"| {label} | {_cell(base)} | {_cell(new)} | {ratio:.2f} | {'yes' if same else 'NO'} |"


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
    load_start = os.getloadavg()[0]
    wall: dict[str, dict[str, list[float]]] = {w: {r: [] for r in RUNS} for w in WHAT}
    cpu: dict[str, dict[str, list[float]]] = {w: {r: [] for r in RUNS} for w in WHAT}
    same = dict.fromkeys(WHAT, True)
    with tempfile.TemporaryDirectory() as tmp:
        base = _baseline(args.baseline, Path(tmp))
        for src in (base, this):
            _compile(src)
        folder = Path(tmp) / "llama7b"
        trees = {"baseline": base, "this": this}
        stores = {tree: Path(tmp) / f"store-{tree}" for tree in trees}
        for _ in range(args.rounds):
            for what in WHAT:
                for store in stores.values():
                    shutil.rmtree(store, ignore_errors=True)
                outputs = []
                for run in RUNS:
                    tree = run.split()[0]
                    if what == "estimate":
                        seconds, used, output = _estimate(trees[tree], stores[tree])
                    else:
                        seconds, used, output = _plan(trees[tree], stores[tree], args.jobs, folder)
                    wall[what][run].append(seconds)
                    cpu[what][run].append(used)
                    outputs.append(output)
                same[what] = same[what] and len(set(outputs)) == 1
    _write(args, base_rev, head, wall, cpu, same, load_start)


WHAT = ("estimate", "plan")
RUNS = ("baseline cold", "this cold", "baseline warm", "this warm")
LABELS = {
    "estimate": "CLI `trainfit estimate tinyllama-1.1b --json`, incl. imports",
    "plan": "`plan()` 7B Llama shape, 10 devices, jobs={jobs}, warm process",
}


def _write(
    args: argparse.Namespace,
    base_rev: str,
    head: str,
    wall: dict[str, dict[str, list[float]]],
    cpu: dict[str, dict[str, list[float]]],
    same: dict[str, bool],
    load_start: float,
) -> None:
    import torch
    import transformers

    head_line = (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} with "
        f"{os.cpu_count()} cores (shared: load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end), "
        f"torch {torch.__version__}, transformers {transformers.__version__}, Python "
        f"{platform.python_version()}; {base_rev} (baseline) against {head} (this tree), "
        f"{args.rounds} alternating rounds (each tree cold, with an empty trace store of its "
        "own, then warm, with the store its cold run filled; cold against cold, warm against "
        "warm), both trees' modules compiled to bytecode first, median (min-max) seconds; same "
        "output: every figure of the four runs equal."
    )
    header = ["| what | baseline | this | ratio | same output |", "|---|---:|---:|---:|---|"]
    for what, name in (("estimate", "results.md"), ("plan", "plan_results.md")):
        label = LABELS[what].format(jobs=args.jobs)
        rows = [
            _row(
                f"{label}: {kind}, {store}",
                times[what][f"baseline {run}"],
                times[what][f"this {run}"],
                same[what],
            )
            for kind, times in (("wall", wall), ("user+sys CPU", cpu))
            for run, store in (("cold", "store empty"), ("warm", "store filled"))
        ]
        text = "\n".join(
            ["", f"## Against {base_rev}, cold and warm", "", head_line, "", *header, *rows, ""]
        )
        with (HERE / name).open("a", encoding="utf-8") as out:
            out.write(text)
        print(text)


if __name__ == "__main__":
    main()
