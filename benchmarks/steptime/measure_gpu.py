"""Time the held-out step-time cases on a CUDA GPU, each in a fresh process.

    PYTHONPATH=src:. python -m benchmarks.steptime.measure_gpu --out DIR [--repeat 2]

As `benchmarks/faithful/measure_gpu.py` times a step: the device synchronised before and after
each step, wall-clock time on the host (`time.perf_counter`), `--warmup` untimed steps (where
a DPO reference copy and the optimizer state are made), then `--timed` steps, their median
kept. `--repeat` runs the whole list again in new processes (run-to-run noise). Writes
DIR/steptime.json (environment + one record per case and run).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import CASES, VOCAB

DEV = os.environ.get("STEPTIME_DEVICE", "cuda")


def _environment() -> dict[str, Any]:
    import torch
    import transformers

    env: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": torch.cuda.get_device_name(0) if DEV == "cuda" else DEV,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
    }
    try:
        import peft

        env["peft"] = peft.__version__
    except ImportError:
        env["peft"] = None
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    env["nvidia_smi"] = smi.stdout.strip()
    env["cpu"] = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        None,
    )
    return env


def _hf(build: dict[str, Any]) -> tuple[Any, Callable[[], Any]]:
    import torch
    import torch.nn.functional as F
    import transformers

    from trainfit.models.catalog import lookup

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[build["dtype"]]
    config = transformers.AutoConfig.for_model(**lookup(build["hf"]).config)
    if build.get("task") == "seqcls":  # a classification head over two labels
        with torch.device(DEV):
            model = transformers.AutoModelForSequenceClassification.from_config(config, dtype=dtype)
        ids = torch.randint(0, config.vocab_size, (build["batch"], build["seq"]), device=DEV)
        labels = torch.randint(0, 2, (build["batch"],), device=DEV)
        return model, lambda: model(input_ids=ids, labels=labels).loss
    with torch.device(DEV):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    if build.get("lora"):
        import peft

        rank = build["lora"]
        lora = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lora)
    rows = build["batch"] * (2 if build.get("dpo") else 1)
    ids = torch.randint(0, config.vocab_size, (rows, build["seq"]), device=DEV)
    if not build.get("dpo"):
        return model, lambda: model(input_ids=ids, labels=ids).loss
    ref_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[build["dpo"]]
    holder: dict[str, Any] = {}
    half = build["batch"]

    def logps(m: Any) -> Any:
        logits = m(input_ids=ids).logits[:, :-1].float()
        return torch.gather(logits.log_softmax(-1), 2, ids[:, 1:, None]).squeeze(2).sum(-1)

    def loss() -> Any:
        if "ref" not in holder:  # the one-off copy a DPO trainer makes in its first step
            holder["ref"] = copy.deepcopy(model).to(ref_dtype).eval().requires_grad_(False)
        pol = logps(model)
        with torch.no_grad():
            ref = logps(holder["ref"])
        margin = (pol[:half] - ref[:half]) - (pol[half:] - ref[half:])
        return -F.logsigmoid(0.1 * margin).mean()

    return model, loss


def _plain(build: dict[str, Any]) -> tuple[Any, Callable[[], Any]]:
    import torch
    import torch.nn.functional as F

    from benchmarks.steptime import models

    model = getattr(models, build["factory"])().to(DEV)
    if "tokens" in build:
        tokens = torch.randint(0, VOCAB, (build["batch"], build["tokens"]), device=DEV)
        return model, lambda: model(tokens)
    x = torch.randn(build["batch"], *build["x"], device=DEV)
    y = torch.randint(0, build["classes"], (build["batch"],), device=DEV)
    return model, lambda: F.cross_entropy(model(x), y)


def _zoo(build: dict[str, Any]) -> tuple[Any, Callable[[], Any]]:
    """A `trainfit.models.zoo` model on its default inputs (`multiplier` rows a sample), its
    loss trainfit's default (cross-entropy against random classes for logits, else the mean),
    with peft LoRA adapters or frozen parameters where the case asks."""
    import fnmatch

    import torch

    from trainfit.models.source import default_loss
    from trainfit.models.zoo import DEFAULT_INPUTS, FACTORIES
    from trainfit.spec import InputSpec

    model = FACTORIES[build["zoo"]]().to(DEV)
    for name, param in model.named_parameters():
        if any(fnmatch.fnmatchcase(name, glob) for glob in build.get("freeze", ())):
            param.requires_grad_(False)
    if build.get("lora"):
        import peft

        lora = build["lora"]
        config = peft.LoraConfig(
            r=lora["rank"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            target_modules=list(lora["targets"]),
        )
        model = peft.get_peft_model(model, config)
    rows = build["batch"] * build.get("multiplier", 1)
    inputs = {}
    for text in DEFAULT_INPUTS[build["zoo"]]:
        spec = InputSpec.parse(text)
        shape = spec.shape(rows)
        inputs[spec.name] = (
            torch.randn(shape, dtype=spec.dtype, device=DEV)
            if spec.dtype.is_floating_point
            else torch.randint(0, spec.high or 2, shape, dtype=spec.dtype, device=DEV)
        )
    return model, lambda: default_loss(model(**inputs))


def _model(build: dict[str, Any]) -> tuple[Any, Callable[[], Any]]:
    if "hf" in build:
        return _hf(build)
    return _zoo(build) if "zoo" in build else _plain(build)


def optimizer_for(build: dict[str, Any], params: list[Any]) -> Any:
    """A case's optimizer over `params`: its kind ("optim", AdamW by default) on its path
    ("path": for-loop, foreach or fused where the case names one; PyTorch's default otherwise)."""
    import torch

    optim = build.get("optim", "adamw")
    flags = {None: {}, "for-loop": {"foreach": False}, "foreach": {"foreach": True}}.get(
        build.get("path"), {"fused": True}
    )
    if optim == "sgd":
        return torch.optim.SGD(params, lr=1e-3, **flags)
    if optim == "sgdm":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **flags)
    if optim == "adam":
        return torch.optim.Adam(params, lr=1e-5, **flags)
    if optim == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-3, **flags)
    return torch.optim.AdamW(params, lr=1e-5, **flags)


def half_of(build: dict[str, Any]) -> str | None:
    """A case's autocast dtype ("half": "fp16" with a GradScaler, or "bf16"); HF cases and
    "amp" cases take bf16; None: no autocast."""
    return build.get("half", "bf16" if "hf" in build or build.get("amp", False) else None)


def make_step(build: dict[str, Any]) -> tuple[int, Callable[[], None]]:
    """A case's training step as a loop body (forward under autocast where the case asks,
    backward, `accum` times where the case accumulates; the optimizer, zero_grad; no
    synchronisation), and its trainable tensors."""
    import torch

    model, loss_fn = _model(build)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = optimizer_for(build, params)
    half = half_of(build)
    dtype = torch.float16 if half == "fp16" else torch.bfloat16  # disabled where half is None
    scaler = torch.amp.GradScaler(DEV) if half == "fp16" else None
    model.train()

    accum = build.get("accum", 1)

    def step() -> None:
        for _ in range(accum):  # gradient accumulation: `accum` micro-batches a step
            with torch.autocast(DEV, dtype=dtype, enabled=half is not None):
                loss = loss_fn()
            (loss if scaler is None else scaler.scale(loss)).backward()
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return len(params), step


def run_one(name: str, warmup: int, timed: int) -> dict[str, Any]:
    import torch

    build = CASES[name]["build"]
    tensors, step = make_step(build)
    sync = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
    steps: list[float] = []
    for _ in range(warmup + timed):
        sync()
        start = time.perf_counter()
        step()
        sync()
        steps.append(time.perf_counter() - start)
    return {
        "case": name,
        "build": build,
        "trainable_tensors": tensors,
        "step_seconds": steps,
        "median_timed_step_seconds": statistics.median(steps[warmup:]),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if DEV == "cuda" else None,
    }


def child_row(cmd: list[str], name: str, timeout: float, fallback: str = "?") -> dict[str, Any]:
    """Run one case's fresh process: the JSON record its last stdout line holds, or
    `{"case": name, "error": ...}` (the last line of its stderr, `fallback` when it printed
    none, or "timeout")."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=os.environ)
    except subprocess.TimeoutExpired:
        return {"case": name, "error": "timeout"}
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    return {"case": name, "error": (done.stderr.strip().splitlines() or [fallback])[-1]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default="")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--timed", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--first-repeat", type=int, default=0)
    parser.add_argument("--deadline", type=float, default=500.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.warmup, args.timed)))
        return
    started = time.perf_counter()
    names = [n for n in args.cases.split(",") if n] or list(CASES)
    record: dict[str, Any] = {"environment": _environment(), "runs": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for repeat in range(args.first_repeat, args.first_repeat + args.repeat):
        for name in names:
            left = args.deadline - (time.perf_counter() - started)
            if left < 20:
                record["runs"].append({"case": name, "repeat": repeat, "error": "deadline"})
                continue
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.steptime.measure_gpu",
                "--one",
                name,
                "--warmup",
                str(args.warmup),
                "--timed",
                str(args.timed),
            ]
            row = child_row(cmd, name, min(left, 150), fallback="failed")
            row["repeat"] = repeat
            record["runs"].append(row)
            ms = row.get("median_timed_step_seconds")
            print(f"[{repeat}] {name}: {row.get('error') or f'{ms * 1000:.2f} ms'}", flush=True)
            (args.out / "steptime.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
