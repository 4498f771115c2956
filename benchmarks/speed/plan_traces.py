"""The traces one cold `plan()` makes (the 7B Llama shape over ten devices, as bench_plan.py
plans it, `jobs=1`, no trace store): each traced layer count's CPU seconds and setting, and how
many steps differ from an earlier one of the plan only in the micro-batch.

    TRAINFIT_NO_CACHE=1 PYTHONPATH=src:. python -m benchmarks.speed.plan_traces

Prints a Markdown table and a summary; writes nothing. The counts tell what sharing one
layer-stamping check between the micro-batches of one setting could save at most (the check's
trace at the third layer count of each such step), and how many traces the plan's batch
scalings would have to answer to cut the number of steps traced.
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path
from typing import Any

import transformers

from benchmarks.speed.bench_estimate import LLAMA_7B
from benchmarks.speed.bench_plan import DEVICES
from trainfit import TrainSpec
from trainfit.plan.search import plan
from trainfit.trace import step


def main() -> None:
    made: list[tuple[Any, ...]] = []
    real = step._trace

    def counted(spec: TrainSpec, target: Any, *args: Any) -> Any:
        started = time.process_time()
        out = real(spec, target, *args)
        layers = args[3] if len(args) > 3 else None
        setting = (
            spec.precision.value,
            "checkpointing" if spec.checkpointing else "-",
            spec.optimizer.value,
            f"sm{target.compute_capability[0]}{target.compute_capability[1]}",
            "copied passes" if args[2] is not None else "",
        )
        made.append((layers, spec.batch, setting, time.process_time() - started))
        return out

    step._trace = counted  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "llama7b"
        transformers.LlamaConfig(**LLAMA_7B).save_pretrained(folder)
        started = time.process_time()
        plan(TrainSpec(model=str(folder), seq_len=1024), 32, DEVICES, jobs=1)
        total = time.process_time() - started
    step._trace = real  # type: ignore[assignment]
    print("| layers | micro-batch | setting | CPU s |\n|---:|---:|---|---:|")
    for layers, batch, setting, seconds in made:
        print(
            f"| {layers or 'all'} | {batch} | {', '.join(s for s in setting if s)} | "
            f"{seconds:.3f} |"
        )
    per_count: dict[object, float] = collections.defaultdict(float)
    for layers, _, _, seconds in made:
        per_count[layers or "all"] += seconds
    steps = [m for m in made if m[0] in (None, 2)]
    seen: set[tuple[str, ...]] = set()
    again = 0
    for _, _, setting, _ in steps:
        again += setting in seen
        seen.add(setting)
    checked: set[tuple[str, ...]] = set()
    check_again = 0.0
    for layers, _, setting, seconds in made:
        if layers == 4:
            if setting in checked:
                check_again += seconds
            checked.add(setting)
    print(
        f"\nplan CPU {total:.2f} s; {len(made)} traces, {len(steps)} steps, CPU by layer "
        f"count {dict((k, round(v, 2)) for k, v in per_count.items())}; {again} steps differ "
        f"from an earlier one only in the micro-batch; their checks' 4-layer traces "
        f"{check_again:.2f} s of CPU"
    )


if __name__ == "__main__":
    main()
