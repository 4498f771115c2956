"""The allocator replays of one cold `plan()` (the 7B Llama shape over ten devices, as
bench_plan.py plans it, `jobs=1`, no trace store), made again two ways in one process: a
`malloc` or `free` call per step (`trainfit.memory.allocator.run_stepwise`, the replay's loop
before `CachingAllocator.run`) and `CachingAllocator.run` (the loop written out); each
replay's result compared (`Replay`, or the OutOfMemory message).

    TRAINFIT_NO_CACHE=1 PYTHONPATH=src:. python -m benchmarks.speed.bench_replay [--rounds 3]

Prints a Markdown line: replays, CPU seconds of each way (the best of `--rounds`, alternating,
the cyclic collector off as in the CLI), their ratio, and whether every result was equal.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

import transformers

from benchmarks.speed.bench_estimate import LLAMA_7B
from benchmarks.speed.bench_plan import DEVICES
from trainfit import TrainSpec
from trainfit.memory import allocator, replay
from trainfit.plan.search import plan


def _captured() -> list[tuple[Any, ...]]:
    """Each `_replay` call of the plan: its arguments."""
    calls: list[tuple[Any, ...]] = []
    real = replay._replay

    def kept(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    replay._replay = kept  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "llama7b"
            transformers.LlamaConfig(**LLAMA_7B).save_pretrained(folder)
            plan(TrainSpec(model=str(folder), seq_len=1024), 32, DEVICES, jobs=1)
    finally:
        replay._replay = real  # type: ignore[assignment]
    return calls


class _Stepwise(allocator.CachingAllocator):
    """The caching allocator replayed a `malloc` or `free` at a time."""

    def run(self, steps: Any, nbytes: Any, marks: allocator.RunMarks) -> Any:
        return allocator.run_stepwise(self, steps, nbytes, marks)


def _made(calls: list[tuple[Any, ...]], stepwise: bool) -> tuple[float, list[str]]:
    """CPU seconds of making every replay again, and each result as text."""
    out = []
    started = time.process_time()
    for trace, workspace, capacity, sizes, kind in calls:
        assert kind is allocator.CachingAllocator
        try:
            made = replay._replay(
                trace, workspace, capacity, sizes, _Stepwise if stepwise else kind
            )
            out.append(repr(made))
        except allocator.OutOfMemory as exc:
            out.append(f"out of memory: {exc}")
    return time.process_time() - started, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    calls = _captured()
    gc.disable()
    times: dict[bool, list[float]] = {True: [], False: []}
    results: dict[bool, list[str]] = {}
    for _ in range(args.rounds):
        for stepwise in (True, False):
            seconds, results[stepwise] = _made(calls, stepwise)
            times[stepwise].append(seconds)
    before, after = min(times[True]), min(times[False])
    print(
        f"| {len(calls)} replays of the cold 7B plan | {before:.2f} | {after:.2f} | "
        f"{after / before:.2f} | {'yes' if results[True] == results[False] else 'NO'} |"
    )


if __name__ == "__main__":
    main()
