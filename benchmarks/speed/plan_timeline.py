"""When each part of one cold `plan()` runs (the 7B Llama shape over ten devices, as
bench_plan.py plans it, in a process warmed by a small estimate): each device's plan, each
multi-GPU search made in this process, and the ladder, with their start and end (seconds from
the start of `plan()`) and this process's CPU seconds; then the wall, this process's CPU and
its worker's (the children's).

    TRAINFIT_NO_CACHE=1 PYTHONPATH=src:. python -m benchmarks.speed.plan_timeline [--jobs 2]

Prints a Markdown table; writes nothing. A search given to the worker shows no row here (its
CPU is the worker's); a wait for the worker shows as wall time beyond a row's CPU.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import transformers

from benchmarks.speed.bench_estimate import LLAMA_7B
from benchmarks.speed.bench_plan import DEVICES
from trainfit import TrainSpec, estimate
from trainfit.plan import beyond
from trainfit.plan import search as planning

Row = tuple[str, str, float, float, float]


def _timed(rows: list[Row], started: list[float], label: str, real: Callable[..., Any]) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        device = next((a.name for a in args if hasattr(a, "compute_capability")), "")
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            end = time.perf_counter() - started[0]
            rows.append((label, device, wall - started[0], end, time.process_time() - cpu))

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    jobs = parser.parse_args().jobs
    rows: list[Row] = []
    started = [0.0]
    for module, name, label in (
        (planning, "plan_device", "device plan"),
        (planning, "ladder_rungs", "ladder"),
        (beyond, "plan_distributed", "multi-GPU search"),
    ):
        setattr(module, name, _timed(rows, started, label, getattr(module, name)))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "llama7b"
        transformers.LlamaConfig(**LLAMA_7B).save_pretrained(folder)
        estimate(TrainSpec(model=str(folder), batch=1, seq_len=64))  # NB: warm the process
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        started[0], cpu = time.perf_counter(), time.process_time()
        planning.plan(TrainSpec(model=str(folder), seq_len=1024), 32, DEVICES, jobs=jobs)
        wall, cpu = time.perf_counter() - started[0], time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker = sum(getattr(after, f) - getattr(children, f) for f in ("ru_utime", "ru_stime"))
    print("| part | device | start s | end s | CPU s |\n|---|---|---:|---:|---:|")
    for label, device, start, end, used in rows:
        print(f"| {label} | {device} | {start:.2f} | {end:.2f} | {used:.2f} |")
    print(f"\njobs={jobs}: wall {wall:.2f} s, this process's CPU {cpu:.2f} s, ", end="")
    print(f"the worker's {worker:.2f} s")


if __name__ == "__main__":
    main()
