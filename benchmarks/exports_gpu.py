"""Build the real trainer objects from trainfit's exports on a GPU machine, with no check patched
out, and keep what they became.

    PYTHONPATH=src python benchmarks/exports_gpu.py OUT_DIR

Plans GPT-2 (1024 tokens, effective batch 64) for an H100 (bf16), a T4 (fp16, no tf32), an
RTX 4060 (micro-batch and accumulation) and the CPU (fp32), once with AdamW and once with the
8-bit optimizer, adds a sharded verdict by hand (FSDP2 over 4 H100s, the plan's shape for a
GPU that needs several) and a data-parallel layout over 2 GPUs, writes every export with
`write_exports`, then for each file:

- hf: `TrainingArguments(output_dir=..., **kwargs)` and `Trainer.get_optimizer_cls_and_kwargs`
  (the 8-bit optim reports "needs bitsandbytes" when it is not installed);
- lightning: `lightning.pytorch.Trainer(**file["trainer"])`, the DataLoader from
  `file["dataloader"]` and the optimizer class from `file["module"]` on a small layer;
- accelerate: accelerate's loader (`load_config_from_file`), `accelerate launch`'s validation
  and environment, and for one process a real `Accelerator` under that environment.

A file that needs more GPUs than the machine has is recorded as skipped, not failed. Writes
OUT_DIR/exports_gpu.json (versions, the device, each case's attributes or error) and the
exported files under OUT_DIR/files/. Exits 1 when a construction failed that should not have.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import importlib.metadata
import json
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from trainfit import TrainSpec
from trainfit.export.layout_words import device_note_text
from trainfit.export.write import write_exports
from trainfit.plan.options import DevicePlan, Plan, Sharded, Verdict
from trainfit.plan.search import plan
from trainfit.spec import OptimizerKind, Precision

DEVICES = ("h100", "t4", "rtx-4060", "cpu")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _plans() -> list[tuple[str, Plan, int | None]]:
    """(label, plan, gpus) for every export set."""
    adamw = plan(TrainSpec(model="gpt2", seq_len=1024, grad_clip=1.0), 64, DEVICES, ladder=False)
    eight = plan(
        TrainSpec(model="gpt2", seq_len=1024, optimizer="adamw-8bit"),
        64,
        ("rtx-4060",),
        ladder=False,
    )
    sharded = DevicePlan(
        device="h100",
        display="H100 (sharded verdict, by hand)",
        verdict=Verdict.NO,
        setting=None,
        changes=(),
        max_micro_batch=0,
        tiers=(),
        sharded=Sharded(
            gpus=4,
            per_gpu_bytes=60 * 2**30,
            precision=Precision.BF16,
            checkpointing=True,
            optimizer=OptimizerKind.ADAMW,
            micro_batch=1,
            instance="",
            instances=1,
            usd_per_hour=None,
        ),
    )
    by_hand = Plan(
        spec=adamw.spec,
        effective_batch=64,
        margin=adamw.margin,
        devices=(sharded,),
        ladder=(),
        ladder_device="",
    )
    h100 = Plan(
        spec=adamw.spec,
        effective_batch=64,
        margin=adamw.margin,
        devices=tuple(d for d in adamw.devices if d.device == "h100"),
        ladder=(),
        ladder_device="",
    )
    return [
        ("adamw", adamw, None),
        ("adamw-8bit", eight, None),
        ("sharded", by_hand, None),
        ("ddp-2", h100, 2),
    ]


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "ok": False,
        "error": f"{type(exc).__name__}: {exc}",
        "where": traceback.format_exception(exc)[-2].strip()[:300],
    }


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _hf(path: Path, out: Path) -> dict[str, Any]:
    from transformers import Trainer, TrainingArguments

    kwargs = json.loads(path.read_text())
    # NB: a fresh tf32 default for each case (TrainingArguments sets torch's global flag)
    args = TrainingArguments(output_dir=str(out / "hf_output"), report_to="none", **kwargs)
    found: dict[str, Any] = {
        "ok": True,
        "per_device_train_batch_size": args.per_device_train_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "bf16": args.bf16,
        "fp16": args.fp16,
        "tf32": args.tf32,
        "mixed_precision": args.mixed_precision,
        "optim": str(args.optim.value),
        "gradient_checkpointing": args.gradient_checkpointing,
        "max_grad_norm": args.max_grad_norm,
        "dataloader_pin_memory": args.dataloader_pin_memory,
        "device": str(args.device),
        "n_gpu": args.n_gpu,
        "fsdp": bool(args.fsdp),
        "fsdp_plugin_args": args.fsdp_plugin_args,
        "torch_fp32_precision": getattr(torch.backends, "fp32_precision", None),
    }
    try:
        cls, opt_kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
        found["optimizer"] = f"{cls.__module__}.{cls.__qualname__}"
        found["optimizer_kwargs"] = {k: repr(v) for k, v in opt_kwargs.items()}
    except ImportError as exc:
        if "bitsandbytes" not in str(exc):
            raise
        found["optimizer"] = f"needs bitsandbytes ({exc})"
    return found


def _lightning(path: Path, out: Path) -> dict[str, Any]:
    import lightning.pytorch as pl

    exported = json.loads(path.read_text())
    trainer_kwargs = exported["trainer"]
    wanted = trainer_kwargs["devices"] * trainer_kwargs.get("num_nodes", 1)
    if trainer_kwargs["accelerator"] == "gpu" and wanted > torch.cuda.device_count():
        return {
            "ok": None,
            "skipped": f"needs {wanted} GPUs, this machine has {torch.cuda.device_count()}",
        }
    trainer = pl.Trainer(
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        default_root_dir=str(out / "lightning_output"),
        **trainer_kwargs,
    )
    loader = torch.utils.data.DataLoader(range(256), **exported["dataloader"])
    module = exported["module"]
    where, _, name = module["optimizer"].rpartition(".")
    found: dict[str, Any] = {
        "ok": True,
        "precision": trainer.precision,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
        "gradient_clip_val": trainer.gradient_clip_val,
        "accelerator": type(trainer.accelerator).__name__,
        "strategy": type(trainer.strategy).__name__,
        "num_devices": trainer.num_devices,
        "num_nodes": trainer.num_nodes,
        "root_device": str(trainer.strategy.root_device),
        "dataloader_batch_size": loader.batch_size,
        "dataloader_pin_memory": loader.pin_memory,
    }
    try:
        cls = getattr(importlib.import_module(where), name)
    except ImportError as exc:
        found["optimizer"] = f"needs {where.split('.')[0]} ({exc})"
        return found
    device = (
        "cuda" if torch.cuda.is_available() and trainer_kwargs["accelerator"] == "gpu" else "cpu"
    )
    layer = torch.nn.Linear(8, 8, device=device)
    optimizer = cls(layer.parameters(), **module["optimizer_kwargs"])
    layer(torch.randn(4, 8, device=device)).sum().backward()
    optimizer.step()  # NB: one real step: the fused kernel runs on the GPU
    found["optimizer"] = f"{type(optimizer).__module__}.{type(optimizer).__qualname__}"
    return found


def _accelerate(path: Path, out: Path) -> dict[str, Any]:
    from accelerate import Accelerator
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.state import AcceleratorState
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env

    config = load_config_from_file(str(path))
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args, _, _ = _validate_launch_command(args)
    if args.multi_gpu or args.use_fsdp:
        env = prepare_multi_gpu_env(args)
    else:
        _, env = prepare_simple_launcher_cmd_env(args)
    found: dict[str, Any] = {
        "ok": True,
        "config_class": type(config).__name__,
        "distributed_type": str(config.distributed_type.value),
        "mixed_precision": config.mixed_precision,
        "num_processes": config.num_processes,
        "num_machines": config.num_machines,
        "use_cpu": config.use_cpu,
        "fsdp_config": config.fsdp_config,
        "launch_env": {
            k: v for k, v in sorted(env.items()) if k.startswith(("ACCELERATE_", "FSDP_"))
        },
    }
    if config.num_processes == 1:
        launched = {k: v for k, v in env.items() if k.startswith(("ACCELERATE_", "FSDP_"))}
        with _environment(launched):
            AcceleratorState._reset_state(reset_partial_state=True)
            # NB: accelerate's config has no accumulation field: the export's header names it
            header = re.search(r"gradient_accumulation_steps=(\d+)", path.read_text())
            accelerator = Accelerator(gradient_accumulation_steps=int(header[1]) if header else 1)
            found["accelerator"] = {
                "mixed_precision": accelerator.mixed_precision,
                "device": str(accelerator.device),
                "distributed_type": str(accelerator.distributed_type.value),
                "gradient_accumulation_steps": accelerator.gradient_accumulation_steps,
            }
            AcceleratorState._reset_state(reset_partial_state=True)
    else:
        found["accelerator"] = "not built: more than one process (accelerate launch starts them)"
    return found


CHECKS: dict[str, Callable[[Path, Path], dict[str, Any]]] = {
    "hf": _hf,
    "lightning": _lightning,
    "accelerate": _accelerate,
}


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    files = out / "files"
    record: dict[str, Any] = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "gpus": torch.cuda.device_count(),
        "versions": {
            name: _version(name)
            for name in ("torch", "transformers", "lightning", "accelerate", "bitsandbytes")
        },
        "torch_cuda": torch.version.cuda,
        "cases": [],
    }
    failed = 0
    for label, result, gpus in _plans():
        directory = files / label
        exported = write_exports(result, ["hf", "lightning", "accelerate", "yaml"], directory, gpus)
        for path in exported.written:
            fmt = path.name.split("_", 1)[0]
            case: dict[str, Any] = {"set": label, "file": str(path.relative_to(out))}
            if fmt in CHECKS:
                with tempfile.TemporaryDirectory() as scratch:
                    try:
                        case["built"] = CHECKS[fmt](path, Path(scratch))
                    except Exception as exc:  # a recording tool: keep each failure, go on
                        case["built"] = _error(exc)
                        failed += 1
            else:
                case["built"] = {"ok": None, "skipped": "the seed-style YAML has no constructor"}
            record["cases"].append(case)
            print(f"{label:11} {path.name:28} {_summary(case['built'])}", file=sys.stderr)
        record.setdefault("skipped", []).extend(f"{label}: {s}" for s in exported.skipped)
        record.setdefault("notes", []).extend(
            f"{label}: {device_note_text(n)}" for n in exported.notes
        )
    record["failed"] = failed
    (out / "exports_gpu.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    return 1 if failed else 0


def _summary(built: dict[str, Any]) -> str:
    if built.get("ok") is False:
        return f"FAILED {built['error'][:120]}"
    if built.get("ok") is None:
        return f"skipped ({built['skipped']})"
    keys = ("precision", "mixed_precision", "optim", "optimizer", "strategy", "distributed_type")
    return "ok " + ", ".join(f"{k}={built[k]}" for k in keys if k in built)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
