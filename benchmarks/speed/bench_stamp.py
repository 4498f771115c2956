"""Layer stamping (`trainfit.trace.stamp`) against the whole trace: equal, field by field, and
how much CPU one trace takes each way, at real layer counts.

    PYTHONPATH=src:. python -m benchmarks.speed.bench_stamp [--rounds 2]   # adds to layer_period.md

Equality: each case is traced stamped and whole in one process (no trace store) and every
`StepTrace` field downstream reads is compared (events and their storage keys, workspaces,
categories, passes, counts, the cost log's table and per-phase orders). Speed: each case is
traced in a fresh process (after a warm-up trace of a 2-layer Llama, traced whole, so that
torch's dispatch set-up is not counted), stamped and whole alternating, CPU seconds of the
`trace_step` call (`time.process_time`, the cyclic collector off as in the CLI).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CASES: dict[str, dict[str, object]] = {
    "tinyllama-1.1b, fp32 AdamW, seq 2048": {"model": "tinyllama-1.1b", "seq_len": 2048},
    "7B Llama shape, bf16, checkpointing, seq 1024, batch 4": {
        "model": "LLAMA_7B",
        "seq_len": 1024,
        "batch": 4,
        "precision": "bf16",
        "checkpointing": True,
    },
    "7B Llama shape, fp32 AdamW, gradient clipping, seq 512": {
        "model": "LLAMA_7B",
        "seq_len": 512,
        "grad_clip": 1.0,
    },
    "llama-3.1-8b, LoRA rank 16, bf16, seq 1024": {
        "model": "llama-3.1-8b",
        "seq_len": 1024,
        "lora": {"rank": 16},
        "precision": "bf16",
    },
    "mistral-7b, fp16, 2 micro-batches, seq 512": {
        "model": "mistral-7b",
        "seq_len": 512,
        "precision": "fp16",
        "grad_accum": 2,
    },
    "qwen2.5-7b, DPO, bf16, checkpointing, seq 1024": {
        "model": "qwen2.5-7b",
        "seq_len": 1024,
        "preference": "dpo",
        "precision": "bf16",
        "checkpointing": True,
    },
    "qwen2-0.5b, LoRA rank 8, bf16, seq 512": {
        "model": "qwen2-0.5b",
        "seq_len": 512,
        "lora": {"rank": 8},
        "precision": "bf16",
    },
    "gpt2-medium (tied embeddings), fp16, seq 1024": {
        "model": "gpt2-medium",
        "seq_len": 1024,
        "precision": "fp16",
    },
    "llama-3.2-3b, pure bf16, SGD, seq 1024": {
        "model": "llama-3.2-3b",
        "seq_len": 1024,
        "precision": "pure-bf16",
        "optimizer": "sgd",
    },
}
TIMED = (
    "tinyllama-1.1b, fp32 AdamW, seq 2048",
    "7B Llama shape, bf16, checkpointing, seq 1024, batch 4",
    "qwen2-0.5b, LoRA rank 8, bf16, seq 512",
    "gpt2-medium (tied embeddings), fp16, seq 1024",
)
ONE = """
import gc, json, os, sys, time
from pathlib import Path
import transformers
from trainfit import TrainSpec
from trainfit.trace.step import trace_step
folder = Path(sys.argv[2])
small = folder / "small"
if not (small / "config.json").exists():
    transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
        num_hidden_layers=2, vocab_size=256).save_pretrained(small)
os.environ["TRAINFIT_STAMP"] = "0"
trace_step(TrainSpec(model=str(small), seq_len=32))
gc.disable()
os.environ["TRAINFIT_STAMP"] = sys.argv[3]
spec = TrainSpec(**json.loads(sys.argv[1]))
started = time.process_time()
trace = trace_step(spec)
print(json.dumps({"cpu": time.process_time() - started, "stamped": trace.stamp.why is None}))
"""


def _spec_values(values: dict[str, object], folder: Path) -> dict[str, object]:
    import transformers

    from benchmarks.speed.bench_estimate import LLAMA_7B

    out = dict(values)
    if out["model"] == "LLAMA_7B":
        where = folder / "llama7b"
        if not (where / "config.json").exists():
            transformers.LlamaConfig(**LLAMA_7B).save_pretrained(where)
        out["model"] = str(where)
    return out


def _equal_rows(folder: Path) -> list[str]:
    from trainfit import TrainSpec
    from trainfit.trace.step import StepTrace, trace_step

    rows = []
    skip = {"replays", "_names", "store_key", "stamp"}
    for name, values in CASES.items():
        spec = TrainSpec(**_spec_values(values, folder))  # type: ignore[arg-type]
        os.environ["TRAINFIT_STAMP"] = "1"
        stamped = trace_step(spec)
        os.environ["TRAINFIT_STAMP"] = "0"
        whole = trace_step(spec)
        same = (
            all(
                getattr(stamped, f.name) == getattr(whole, f.name)
                for f in dataclasses.fields(StepTrace)
                if f.name not in skip
            )
            and stamped.costs == whole.costs
            and stamped.category_names() == whole.category_names()
        )
        note = stamped.stamp
        assert note is not None
        how = "stamped" if note.why is None else f"whole ({note.why.value})"
        rows.append(
            f"| {name} | {note.layers} | {', '.join(map(str, note.traced))} | {how} | "
            f"{len(whole.events)} | {'yes' if same else 'NO'} |"
        )
        print(rows[-1], flush=True)
    return rows


def _seconds(name: str, switch: str, folder: Path) -> tuple[float, bool]:
    import json

    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    env["TRAINFIT_NO_CACHE"] = "1"
    values = json.dumps(_spec_values(CASES[name], folder))
    out = subprocess.run(
        [sys.executable, "-c", ONE, values, str(folder), switch],
        capture_output=True,
        check=True,
        env=env,
        text=True,
        cwd=ROOT,
    ).stdout
    data = json.loads(out.splitlines()[-1])
    return data["cpu"], data["stamped"]


def _speed_rows(folder: Path, rounds: int) -> list[str]:
    rows = []
    for name in TIMED:
        times: dict[str, list[float]] = {"1": [], "0": []}
        for _ in range(rounds):
            for switch in ("1", "0"):
                seconds, _ = _seconds(name, switch, folder)
                times[switch].append(seconds)
        on, off = statistics.median(times["1"]), statistics.median(times["0"])
        rows.append(
            f"| {name} | {on:.2f} ({min(times['1']):.2f}-{max(times['1']):.2f}) | "
            f"{off:.2f} ({min(times['0']):.2f}-{max(times['0']):.2f}) | {on / off:.2f} |"
        )
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    import torch
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ["TRAINFIT_NO_CACHE"] = "1"
    load_start = os.getloadavg()[0]
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        equal = _equal_rows(folder)
        speed = _speed_rows(folder, args.rounds)
    lines = [
        "",
        "## Layer stamping against the whole trace",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} with "
        f"{os.cpu_count()} cores (shared: load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end), torch {torch.__version__}, transformers "
        f"{transformers.__version__}, Python {platform.python_version()}; tree {head}; "
        "`python -m benchmarks.speed.bench_stamp`, no trace store.",
        "",
        "Each step stamped (`TRAINFIT_STAMP=1`) and traced whole (`TRAINFIT_STAMP=0`) in one "
        "process: the layer counts traced to stamp it (fitted at the first two, checked at "
        "the third; four when the first check failed and the fit was made again one layer "
        "up), the whole trace's events, and whether every field downstream reads is equal:",
        "",
        "| step | layers | traced at | made | events | equal |",
        "|---|---:|---|---|---:|---|",
        *equal,
        "",
        f"CPU seconds of one `trace_step` in a fresh process, {args.rounds} alternating rounds, "
        "median (min-max):",
        "",
        "| step | stamped | whole | ratio |",
        "|---|---:|---:|---:|",
        *speed,
        "",
    ]
    with (HERE / "layer_period.md").open("a", encoding="utf-8") as out:
        out.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
