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
from typing import TYPE_CHECKING, Any

from trainfit.cli import help as helps
from trainfit.cli import spec_args
from trainfit.cli.interrupt import INTERRUPTED
from trainfit.hardware.catalog import DeviceKind

if TYPE_CHECKING:
    from trainfit.cli.progress import StatusLine

EXAMPLES = (
    "trainfit measure gpt2 --batch 8 --seq 512 --precision bf16   # steps, beside the estimate",
    "trainfit measure gpt2 --seq 512 --precision bf16 --max-batch   # the real largest micro-batch",
    "trainfit measure gpt2 --seq 128 --latency --latency-batch 32   # p50/p95/p99 at batch 1, 32",
    "trainfit measure trainfit.models.zoo:emotion_mlp --batch 32 --on cpu --steps 5",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `measure` subcommand."""
    parser = helps.command_parser(
        sub,
        "measure",
        "run real training steps here and compare",
        (
            helps.MODEL,
            helps.BATCH,
            helps.PRECISION,
            helps.DEVICE,
            helps.MEASUREMENT,
            helps.OUTPUT,
        ),
        EXAMPLES,
    )
    helps.group(parser, helps.MODEL).add_argument(
        "model", help="catalog name, HF model directory or hub id, or pkg.module:factory"
    )
    spec_args.add_arguments(parser)
    device = helps.group(parser, helps.DEVICE)
    device.add_argument(
        "--on",
        default=None,
        metavar="LOCAL",
        help="local device to run on: cuda, cuda:N, mps or cpu (default: the best one here)",
    )
    device.add_argument(
        "--device",
        default=None,
        help="catalog row to estimate for (default: the row matching the local device)",
    )
    device.add_argument(
        "--catalog", action="append", default=[], metavar="PATH", help="a user device catalog file"
    )
    steps = helps.group(parser, helps.MEASUREMENT)
    steps.add_argument(
        "--steps",
        type=int,
        default=None,
        help="timed steps, each synchronised, then as many back to back for a training "
        "loop's step time (default 10)",
    )
    steps.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    steps.add_argument(
        "--no-estimate", action="store_true", help="measure only; skip the estimate beside it"
    )
    steps.add_argument(
        "--force",
        action="store_true",
        help="run even when the estimate says the step needs more than is free",
    )
    batch = helps.group(parser, helps.BATCH)
    batch.add_argument(
        "--max-batch", action="store_true", help="find the real largest micro-batch instead"
    )
    batch.add_argument(
        "--effective-batch",
        type=int,
        default=None,
        help="with --max-batch: keep this effective batch (micro-batch x accumulation x ranks)",
    )
    batch.add_argument(
        "--eval-batch",
        type=int,
        default=None,
        help="with --max-batch: evaluation batch tried after training (default: the micro-batch)",
    )
    batch.add_argument(
        "--no-eval", action="store_true", help="with --max-batch: skip the evaluation pass"
    )
    batch.add_argument(
        "--limit", type=int, default=4096, help="with --max-batch: largest micro-batch tried"
    )
    batch.add_argument(
        "--attempt-steps",
        type=int,
        default=3,
        help="with --max-batch: optimizer steps per attempt",
    )
    steps.add_argument("--latency", action="store_true", help="measure inference latency instead")
    steps.add_argument(
        "--latency-batch",
        type=int,
        action="append",
        default=[],
        help="with --latency: a batch besides 1 (repeatable)",
    )
    steps.add_argument("--runs", type=int, default=100, help="with --latency: timed runs")
    output = helps.group(parser, helps.OUTPUT)
    output.add_argument("--json", action="store_true", help="print JSON instead of tables")
    output.add_argument("--out", default=None, help="also write the JSON to this file")


def run(args: argparse.Namespace) -> int:
    """Measure and print; returns the exit code (`INTERRUPTED` when interrupted)."""
    from trainfit.hardware.catalog import using_catalogs

    with using_catalogs(args.catalog):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from trainfit.cli.progress import shown, status

    _check(args)
    process_group = _init_distributed(args)
    # NB: one status line, on the first rank's terminal only
    show = shown(args.json) and int(os.environ.get("RANK", "0")) == 0
    try:
        with status(show) as line:
            return _dispatch(args, line)
    finally:
        if process_group:
            import torch.distributed

            torch.distributed.destroy_process_group()


def _dispatch(args: argparse.Namespace, line: StatusLine | None) -> int:
    """Run the measurement `args` ask for; `line` (when shown) is stopped before printing."""
    from trainfit.progress import Activity, Part, tell

    tell(Part.MEASURE, Activity.IMPORT.value)
    from trainfit.measure.backend import backend_for  # NB: imports torch

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
        _emit(args, table.to_dict(), lambda: _latency(table), line)
        return INTERRUPTED if table.interrupted else 0
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
    if target is not None and not args.no_estimate:
        _same_kind(target, backend)
    if args.max_batch:
        return _max_batch(args, spec, backend, target, note, line)
    if target is not None:
        tell(Part.MEASURE, Activity.ESTIMATE.value)
    return _measure(args, spec, backend, target, note, line)


def _same_kind(target: str, backend: Any) -> None:
    """MeasureError when --device names another kind of device than the one the steps run on."""
    from trainfit.errors import MeasureError
    from trainfit.hardware.catalog import get_device

    device = get_device(target)
    if device.kind != backend.kind:
        raise MeasureError(
            f"--device {target} is a {device.kind} device but the steps run on {backend.name()} "
            f"({backend.kind}): the two would not be comparable; pass a {backend.kind} row "
            "(`trainfit devices`), drop --device to match this one, or --no-estimate"
        )


def _check_out(out: str | None) -> None:
    """Before any step runs: --out names a file in a folder that exists."""
    from trainfit.errors import MeasureError

    if out is None:
        return
    folder = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise MeasureError(f"--out {out} is a directory: give the path of a .json file")
    if not os.path.isdir(folder):
        raise MeasureError(f"--out {out}: its folder {folder} does not exist: create it first")


def _check(args: argparse.Namespace) -> None:
    from trainfit.errors import MeasureError

    for mode, on, flags in (
        (
            "--max-batch",
            args.max_batch,
            (
                ("--effective-batch", args.effective_batch is not None),
                ("--eval-batch", args.eval_batch is not None),
                ("--no-eval", args.no_eval),
                ("--attempt-steps", args.attempt_steps != 3),
                ("--limit", args.limit != 4096),
            ),
        ),
        (
            "--latency",
            args.latency,
            (("--latency-batch", bool(args.latency_batch)), ("--runs", args.runs != 100)),
        ),
    ):
        wrong = [flag for flag, given in flags if given]
        if wrong and not on:
            verb, them = ("applies", "it") if len(wrong) == 1 else ("apply", "them")
            raise MeasureError(
                f"{', '.join(wrong)} only {verb} with {mode}: add {mode}, or drop {them}"
            )
    _check_out(args.out)
    if args.max_batch and args.latency:
        raise MeasureError("choose one of --max-batch and --latency")
    if args.steps is not None and (args.max_batch or args.latency):
        raise MeasureError(
            "--steps counts timed training steps: with --max-batch use --attempt-steps, with "
            "--latency --runs"
        )
    if args.latency and (args.batch != 1 or args.grad_accum != 1):
        raise MeasureError(
            "--latency times batch 1 and each --latency-batch: give the batch as "
            "--latency-batch instead of --batch/--grad-accum"
        )
    if args.effective_batch is not None and args.effective_batch < 1:
        raise MeasureError(f"--effective-batch must be at least 1, got {args.effective_batch}")
    args.steps = 10 if args.steps is None else args.steps
    if not (args.max_batch or args.latency) and (args.steps < 1 or args.warmup < 1):
        raise MeasureError(
            f"--steps must be at least 1 and --warmup at least 1 (the first step creates the "
            f"optimizer state), got steps={args.steps}, warmup={args.warmup}"
        )


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


def _measure(
    args: argparse.Namespace,
    spec: Any,
    backend: Any,
    target: str | None,
    note: str | None,
    line: StatusLine | None,
) -> int:
    from trainfit.measure.steps import measure

    result = None
    if target is not None:
        from trainfit.estimator.step import estimate

        result = estimate(spec)
        if not args.force:
            from trainfit.measure.room import check_room

            check_room(spec, backend, result)
    on_step, on_loop = _announce(spec, backend, result, args, line)
    measured = measure(
        spec,
        steps=args.steps,
        warmup=args.warmup,
        loop_steps=args.steps,
        backend=backend,
        on_step=on_step,
        on_loop=on_loop,
    )
    comparison = None
    if result is not None:
        from trainfit.measure.compare import compare, component_totals

        totals = None
        if backend.kind == DeviceKind.CUDA and result.device.kind is DeviceKind.CUDA:
            from trainfit.memory.runtime import cublas_workspace_bytes

            workspace = cublas_workspace_bytes(result.device.compute_capability)
            totals = component_totals(spec, workspace)
        comparison = compare(result, measured, totals)
    out: dict[str, Any] = {"measured": measured.to_dict()}
    if comparison is not None:
        from trainfit.report.estimate import estimate_dict
        from trainfit.report.measure import comparison_dict

        out["comparison"] = comparison_dict(comparison)

        out["estimate"] = estimate_dict(result) if result is not None else None
    if note:
        out["note"] = note

    def show() -> list[Any]:
        from rich.text import Text

        from trainfit.report.measure import measured_renderable

        shown: list[Any] = [measured_renderable(measured, comparison)]
        if note:
            shown.append(Text(note, style="yellow"))
        return shown

    _emit(args, out, show, line)
    return INTERRUPTED if measured.interrupted else 0


def _announce(
    spec: Any, backend: Any, result: Any, args: argparse.Namespace, status: StatusLine | None
) -> Any:
    """Print the run's forecast and warnings on stderr before it starts; return the callbacks
    that print each step and the loop window as they complete (the status line, when shown,
    removed first)."""
    from trainfit.measure.forecast import forecast
    from trainfit.report.measure import forecast_lines, loop_line, step_line

    ahead = forecast(
        result, backend.kind, spec.precision, args.warmup + args.steps, loop_steps=args.steps
    )
    yellow = sys.stderr.isatty()
    if status is not None:
        status.stop()
    for line, warning in forecast_lines(ahead):
        print(f"\033[33m{line}\033[0m" if warning and yellow else line, file=sys.stderr)

    def on_step(done: Any) -> None:
        if status is not None:
            status.stop()
        print(step_line(done), file=sys.stderr, flush=True)

    def on_loop(window: Any) -> None:
        if status is not None:
            status.stop()
        print(loop_line(window), file=sys.stderr, flush=True)

    return on_step, on_loop


def _max_batch(
    args: argparse.Namespace,
    spec: Any,
    backend: Any,
    target: str | None,
    note: str | None,
    line: StatusLine | None,
) -> int:
    from trainfit.errors import TrainfitError
    from trainfit.measure.max_batch import find_max_batch, world
    from trainfit.progress import Activity, Part, tell

    predicted = None
    notes = [note] if note else []
    if target is not None and backend.kind != DeviceKind.CPU:
        from trainfit.estimator.scaling import max_micro_batch

        tell(Part.MEASURE, Activity.PREDICT.value)
        try:
            predicted = max_micro_batch(spec).batch or None
        except TrainfitError as exc:
            notes.append(f"no prediction to start from ({exc}); the search starts at 1")
    effective = args.effective_batch
    if effective is None and (args.batch != 1 or args.grad_accum != 1):
        effective = args.batch * args.grad_accum * world()[1]
        notes.append(
            f"keeping the effective batch of --batch {args.batch} x --grad-accum "
            f"{args.grad_accum}"
            + (f" x {world()[1]} ranks" if world()[1] > 1 else "")
            + f" = {effective} (--effective-batch sets another)"
        )
    found = find_max_batch(
        spec,
        effective_batch=effective,
        eval_batch=args.eval_batch,
        evaluate=not args.no_eval,
        limit=args.limit,
        steps=args.attempt_steps,
        start=predicted,
        backend=backend,
    )
    if world()[0] != 0:
        return INTERRUPTED if found.interrupted else 0
    from trainfit.report.measure import max_batch_dict

    out: dict[str, Any] = max_batch_dict(found)
    if notes:
        out["command_notes"] = notes

    def show() -> list[Any]:
        from rich.text import Text

        from trainfit.report.measure import max_batch_renderable

        return [max_batch_renderable(found), *(Text(n, style="yellow") for n in notes)]

    _emit(args, out, show, line)
    return INTERRUPTED if found.interrupted else 0


def _latency(table: Any) -> list[Any]:
    from trainfit.report.measure import latency_renderable

    return [latency_renderable(table)]


def _emit(
    args: argparse.Namespace, data: dict[str, Any], shown: Any, line: StatusLine | None
) -> None:
    """Print JSON or the tables (the status line, when shown, removed first); write --out
    atomically."""
    if line is not None:
        line.stop()
    text = json.dumps(data, indent=2)
    if args.out:
        from trainfit.io import write_atomically

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
