"""`trainfit measure` on a real GPU, as a user runs it: one fresh process per command.

    PYTHONPATH=src:. python -m benchmarks.measure.run_gpu --out DIR [--part steps|faults|max-batch]

Part "steps" (default):
- `trainfit doctor --json` (the whole stack's checks);
- `trainfit measure CASE --json` for each case of `STEP_CASES` (accuracy-suite specs): 3
  warm-up + 10 timed steps, the estimate for the matched catalog row beside it;
- `trainfit measure --latency` for `LATENCY_CASES` at batch 1 and a larger batch;
- faults: no GPU visible (`CUDA_VISIBLE_DEVICES=`), a busy GPU (another process holding all but
  4 GiB; then with `--force`), a model that fails its own forward, Ctrl-C (SIGINT) during the
  timed steps. Each records the exit code and stderr.
Part "max-batch": `trainfit measure --max-batch` for `MAX_BATCH_CASES` (their fresh-process
answers are in benchmarks/max_batch/results/max_batch_h100.md).

Everything lands under DIR as JSON (one file per command, written as it finishes) plus
environment.json; `benchmarks/measure/compare.py` makes the table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.accuracy.cases import CASES
from benchmarks.max_batch.cases import CASES as MAX_CASES

STEP_CASES = (
    "gpt2-bf16",
    "gpt2-fp16-scaler",
    "bert-base-bf16",
    "tinyllama-bf16",
    "qwen2-0.5b-bf16-clip",
    "llama-3.2-1b-ckpt-bf16",
    "resnet50-fp32",
    "vit-base-bf16-b128",
    "whisper-small-bf16",
    "vq-ae-fp32",
    "melody-transformer-fp16",
    "lstm-cudnn-fp32",
)
LATENCY_CASES = {
    "gpt2-bf16": 32,
    "melody-transformer-fp16": 64,
    "emotion-mlp-fp32": 256,
}
MAX_BATCH_CASES = (
    "t5-small-bf16-s512",
    "bert-base-bf16-s512",
    "gpt2-bf16-s1024",
    "qwen2-0.5b-bf16-s1024",
    "llama-3.2-1b-pure-bf16-s2048",
)


def cli_args(kwargs: dict[str, Any]) -> list[str]:
    """The `trainfit measure` options of a TrainSpec's keyword arguments."""
    out = [kwargs["model"]]
    flags = {
        "batch": "--batch",
        "seq_len": "--seq",
        "precision": "--precision",
        "optimizer": "--optimizer",
        "grad_clip": "--grad-clip",
        "grad_accum": "--grad-accum",
        "multiplier": "--multiplier",
        "loss": "--loss",
        "step_fn": "--step-fn",
        "task": "--task",
        "checkpoint_modules": "--checkpoint-modules",
    }
    for key, value in kwargs.items():
        if key in flags:
            out += [flags[key], str(value)]
        elif key == "checkpointing" and value:
            out.append("--checkpointing")
        elif key == "inputs":
            for item in value:
                out += ["--input", item]
        elif key == "freeze":
            for item in value:
                out += ["--freeze", item]
        elif key not in ("model", "checkpointing"):
            raise SystemExit(f"no CLI flag for {key}")
    return out


def trainfit(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `python -m trainfit ARGV`; its exit code, JSON stdout (or text) and stderr."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trainfit", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"argv": argv, "returncode": None, "error": f"timed out after {timeout} s"}
    record: dict[str, Any] = {
        "argv": argv,
        "returncode": done.returncode,
        "stderr": done.stderr[-3000:],
        "seconds": round(time.perf_counter() - started, 2),
    }
    try:
        record["result"] = json.loads(done.stdout)
    except json.JSONDecodeError:
        record["stdout"] = done.stdout[-3000:]
    return record


def save(out: Path, name: str, record: dict[str, Any]) -> None:
    path = out / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    code = record.get("returncode")
    print(f"{name}: exit {code} ({record.get('seconds')} s)", flush=True)


def environment(out: Path) -> None:
    import datetime
    import platform

    import torch
    import transformers

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    (out / "environment.json").write_text(
        json.dumps(
            {
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "nvidia_smi": smi,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "transformers": transformers.__version__,
                "python": platform.python_version(),
            },
            indent=1,
        )
    )


def steps_part(out: Path) -> None:
    if STEP_CASES:
        save(out, "doctor", trainfit(["doctor", "--json"], 300))
    for name in STEP_CASES:
        save(out, f"steps/{name}", trainfit(["measure", *cli_args(CASES[name]), "--json"], 240))
    for name, batch in LATENCY_CASES.items():
        kwargs = {k: v for k, v in CASES[name].items() if k != "batch"}
        argv = ["measure", *cli_args(kwargs), "--latency", "--latency-batch", str(batch), "--json"]
        save(out, f"latency/{name}", trainfit(argv, 240))


FAULTS = ("no-gpu", "broken-forward", "busy-gpu", "ctrl-c")


def faults(out: Path) -> None:
    gpt2 = cli_args(CASES["gpt2-bf16"])
    if "no-gpu" not in FAULTS and "broken-forward" not in FAULTS and "busy-gpu" not in FAULTS:
        ctrl_c(out, gpt2)
        return
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    save(out, "faults/no-gpu", trainfit(["measure", *gpt2, "--on", "cuda"], 120, env))
    broken = ["tests.measure_models:broken_mlp", "--input", "x=B,16:float32", "--no-estimate"]
    save(out, "faults/broken-forward", trainfit(["measure", *broken, "--on", "cuda"], 120))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import torch, sys, time; free, total = torch.cuda.mem_get_info();"
            "x = torch.empty(free - (4 << 30), dtype=torch.uint8, device='cuda');"
            "print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        holder.stdout.readline()
        save(out, "faults/busy-gpu", trainfit(["measure", *gpt2, "--json"], 180))
        save(out, "faults/busy-gpu-force", trainfit(["measure", *gpt2, "--force", "--json"], 180))
    finally:
        holder.kill()
        holder.wait()
    if "ctrl-c" in FAULTS:
        ctrl_c(out, gpt2)


def ctrl_c(out: Path, gpt2: list[str]) -> None:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainfit", "measure", *gpt2, "--steps", "100000", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(40)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    record: dict[str, Any] = {
        "argv": "measure gpt2-bf16 --steps 100000, SIGINT after 40 s",
        "returncode": proc.returncode,
        "stderr": stderr[-3000:],
        "seconds": round(time.perf_counter() - started, 2),
    }
    try:
        record["result"] = json.loads(stdout)
    except json.JSONDecodeError:
        record["stdout"] = stdout[-3000:]
    save(out, "faults/ctrl-c", record)


def max_batch_part(out: Path) -> None:
    for name in MAX_BATCH_CASES:
        argv = ["measure", *cli_args(MAX_CASES[name]), "--max-batch", "--json"]
        save(out, f"max_batch/{name}", trainfit(argv, 300))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--part", choices=("steps", "faults", "max-batch"), default="steps")
    parser.add_argument("--only", default=None, help="comma-separated case or fault names")
    args = parser.parse_args()
    if args.only:
        only = set(args.only.split(","))
        global STEP_CASES, LATENCY_CASES, MAX_BATCH_CASES, FAULTS
        STEP_CASES = tuple(c for c in STEP_CASES if c in only)
        LATENCY_CASES = {c: b for c, b in LATENCY_CASES.items() if c in only}
        MAX_BATCH_CASES = tuple(c for c in MAX_BATCH_CASES if c in only)
        FAULTS = tuple(f for f in FAULTS if f in only)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    environment(out)
    if args.part == "steps":
        steps_part(out)
    elif args.part == "faults":
        faults(out)
    else:
        max_batch_part(out)


if __name__ == "__main__":
    main()
