"""`trainfit measure`: run the spec for real on this machine, beside its estimate.

trainfit measure gpt2 --batch 8 --seq 512 --precision bf16        steps, beside the estimate
trainfit measure gpt2 --seq 512 --precision bf16 --max-batch      the real largest micro-batch
trainfit measure gpt2 --seq 128 --latency --latency-batch 32      p50/p95/p99 at batch 1 and 32
torchrun --nproc-per-node 2 -m trainfit measure ... --max-batch   every rank agrees
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from trainfit.cli import spec_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `measure` subcommand."""
    parser = sub.add_parser("measure", help="run real training steps here and compare")
    parser.add_argument(
        "model", help="catalog name, HF model directory or hub id, or pkg.module:factory"
    )
    spec_args.add_arguments(parser)
    parser.add_argument(
        "--on",
        default=None,
        metavar="LOCAL",
        help="local device to run on: cuda, cuda:N, mps or cpu (default: the best one here)",
    )
    parser.add_argument(
        "--device",
        default=None,
        help="catalog row to estimate for (default: the row matching the local device)",
    )
    parser.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument(
        "--no-estimate", action="store_true", help="measure only; skip the estimate beside it"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even when the estimate says the step needs more than is free",
    )
    parser.add_argument(
        "--max-batch", action="store_true", help="find the real largest micro-batch instead"
    )
    parser.add_argument(
        "--effective-batch",
        type=int,
        default=None,
        help="with --max-batch: keep this effective batch (micro-batch x accumulation x ranks)",
    )
    parser.add_argument(
        "--eval-batch",
        type=int,
        default=None,
        help="with --max-batch: evaluation batch tried after training (default: the micro-batch)",
    )
    parser.add_argument(
        "--no-eval", action="store_true", help="with --max-batch: skip the evaluation pass"
    )
    parser.add_argument(
        "--limit", type=int, default=4096, help="with --max-batch: largest micro-batch tried"
    )
    parser.add_argument(
        "--attempt-steps",
        type=int,
        default=3,
        help="with --max-batch: optimizer steps per attempt (default 3)",
    )
    parser.add_argument("--latency", action="store_true", help="measure inference latency instead")
    parser.add_argument(
        "--latency-batch",
        type=int,
        action="append",
        default=[],
        help="with --latency: a batch besides 1 (repeatable)",
    )
    parser.add_argument("--runs", type=int, default=100, help="with --latency: timed runs")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--out", default=None, help="also write the JSON to this file")
    parser.add_argument(
        "--catalog", action="append", default=[], metavar="PATH", help="a user device catalog file"
    )


def run(args: argparse.Namespace) -> int:
    """Measure and print; returns the exit code (130 when interrupted)."""
    from trainfit.hardware.catalog import using_catalogs

    with using_catalogs(args.catalog):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from trainfit.measure.backend import backend_for

    _check(args)
    process_group = _init_distributed(args)
    try:
        backend = backend_for(args.on)
        if args.latency:
            from trainfit.measure.latency import measure_latency

            spec = spec_args.spec(args, device=args.device or "h100")
            table = measure_latency(
                spec,
                batches=(1, *args.latency_batch),
                warmup=args.warmup,
                runs=args.runs,
                backend=backend,
            )
            _emit(args, table.to_dict(), lambda: _latency(table))
            return 130 if table.interrupted else 0
        target = args.device
        note = None
        if target is None and not args.no_estimate:
            from trainfit.errors import MeasureError
            from trainfit.measure.compare import local_catalog_device

            try:
                target = local_catalog_device(backend)
            except MeasureError as exc:
                note = f"no estimate beside the measurement: {exc}"
        spec = spec_args.spec(args, device=target or "h100")
        if args.max_batch:
            return _max_batch(args, spec, backend, target, note)
        return _measure(args, spec, backend, target, note)
    finally:
        if process_group:
            import torch.distributed

            torch.distributed.destroy_process_group()


def _check(args: argparse.Namespace) -> None:
    from trainfit.errors import MeasureError

    wrong = [
        flag
        for flag, given in (
            ("--effective-batch", args.effective_batch is not None),
            ("--eval-batch", args.eval_batch is not None),
            ("--no-eval", args.no_eval),
            ("--attempt-steps", args.attempt_steps != 3),
        )
        if given and not args.max_batch
    ]
    if args.latency_batch and not args.latency:
        wrong.append("--latency-batch")
    if wrong:
        raise MeasureError(f"{', '.join(wrong)} only apply with --max-batch or --latency")
    if args.max_batch and args.latency:
        raise MeasureError("choose one of --max-batch and --latency")


def _init_distributed(args: argparse.Namespace) -> bool:
    """Under torchrun (WORLD_SIZE > 1) join the process group, one GPU per local rank."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    import torch
    import torch.distributed

    from trainfit.errors import MeasureError

    if not args.max_batch:
        raise MeasureError(
            "under torchrun only --max-batch runs (the ranks agree on it); run the other "
            "measurements in one process"
        )
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.on in (None, "cuda") and torch.cuda.is_available():
        args.on = f"cuda:{local}"
        torch.cuda.set_device(local)
        torch.distributed.init_process_group("nccl")
    else:
        torch.distributed.init_process_group("gloo")
    return True


def _room(spec: Any, backend: Any, estimate: Any) -> None:
    """MeasureError when the estimate needs more than the device has free (a busy GPU)."""
    from trainfit.errors import MeasureError

    free = backend.free_memory()
    if backend.kind == "cpu" or free is None or estimate.device_memory_needed_bytes <= free:
        return
    from trainfit.memory.scaling import max_micro_batch

    total = backend.total_memory() or free
    GiB = 1 << 30
    fits = max_micro_batch(spec, margin=max(0.0, 1.0 - free / estimate.device.memory_bytes))
    others = max(0, total - free)
    advice = (
        f"micro-batch {fits.batch} fits in what is free (estimated): use --batch {fits.batch}"
        if fits.batch
        else "not even micro-batch 1 fits in what is free"
    )
    raise MeasureError(
        f"{backend.name()} has {free / GiB:.2f} GiB free of {total / GiB:.2f} GiB (other "
        f"processes hold {others / GiB:.2f} GiB) and this step needs about "
        f"{estimate.device_memory_needed_bytes / GiB:.2f} GiB (estimated); {advice}, free the "
        "GPU, or pass --force to try anyway"
    )


def _measure(
    args: argparse.Namespace, spec: Any, backend: Any, target: str | None, note: str | None
) -> int:
    from trainfit.measure.steps import measure

    result = None
    if target is not None:
        from trainfit.estimate import estimate

        result = estimate(spec)
        if not args.force:
            _room(spec, backend, result)
    measured = measure(spec, steps=args.steps, warmup=args.warmup, backend=backend)
    comparison = None
    if result is not None:
        from trainfit.measure.compare import compare, component_totals

        totals = None
        if backend.kind == "cuda" and result.device.kind == "cuda":
            from trainfit.memory.runtime import cublas_workspace_bytes

            workspace = cublas_workspace_bytes(result.device.compute_capability)
            totals = component_totals(spec, workspace)
        comparison = compare(result, measured, totals)
    out: dict[str, Any] = {"measured": measured.to_dict()}
    if comparison is not None:
        out["comparison"] = comparison.to_dict()
        out["estimate"] = result.to_dict() if result is not None else None
    if note:
        out["note"] = note

    def show() -> list[Any]:
        from rich.text import Text

        from trainfit.report.measure import measured_renderable

        shown: list[Any] = [measured_renderable(measured, comparison)]
        if note:
            shown.append(Text(note, style="yellow"))
        return shown

    _emit(args, out, show)
    return 130 if measured.interrupted else 0


def _max_batch(
    args: argparse.Namespace, spec: Any, backend: Any, target: str | None, note: str | None
) -> int:
    from trainfit.measure.max_batch import find_max_batch, world

    predicted = None
    if target is not None:
        from trainfit.memory.scaling import max_micro_batch

        predicted = max_micro_batch(spec).batch or None
    found = find_max_batch(
        spec,
        effective_batch=args.effective_batch,
        eval_batch=args.eval_batch,
        evaluate=not args.no_eval,
        limit=args.limit,
        steps=args.attempt_steps,
        start=predicted,
        backend=backend,
    )
    if world()[0] != 0:
        return 130 if found.interrupted else 0
    out: dict[str, Any] = found.to_dict()
    if note:
        out["note"] = note

    def show() -> list[Any]:
        from rich.text import Text

        from trainfit.report.measure import max_batch_renderable

        shown: list[Any] = [max_batch_renderable(found)]
        if note:
            shown.append(Text(note, style="yellow"))
        return shown

    _emit(args, out, show)
    return 130 if found.interrupted else 0


def _latency(table: Any) -> list[Any]:
    from trainfit.report.measure import latency_renderable

    return [latency_renderable(table)]


def _emit(args: argparse.Namespace, data: dict[str, Any], shown: Any) -> None:
    """Print JSON or the tables; write --out atomically."""
    text = json.dumps(data, indent=2)
    if args.out:
        from trainfit.configs import write_atomically

        write_atomically(args.out, text + "\n")
    if args.json:
        print(text)
        return
    from rich.console import Console

    console = Console()
    for item in shown():
        console.print(item)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
