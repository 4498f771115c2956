"""`trainfit plan MODEL --inference ...`: generation memory and latency per device and precision."""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `--inference` options of `trainfit plan`."""
    parser.add_argument(
        "--inference",
        action="store_true",
        help="plan greedy generation (KV cache, prefill, decode) instead of training",
    )
    parser.add_argument("--context", type=int, default=None, help="prompt tokens (--inference)")
    parser.add_argument(
        "--new-tokens", type=int, default=None, help="tokens generated per sequence (--inference)"
    )
    parser.add_argument(
        "--inference-precision",
        default="bf16",
        metavar="bf16,int8,int4",
        help="weight precisions to plan, comma-separated: fp16, bf16, int8, int4 (modelled)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        action="append",
        default=[],
        help="sequences generated together (--inference; repeatable, default 1)",
    )


def _precisions(args: argparse.Namespace) -> list[object]:
    from trainfit.estimator.generation import InferencePrecision
    from trainfit.spec import parse_enum

    return [
        parse_enum(InferencePrecision, "inference precision", p)
        for p in args.inference_precision.split(",")
        if p.strip()
    ]


def serving_spec(args: argparse.Namespace) -> object:
    """The model as `plan` names it (inputs, sequence length, loss), for a forward's trace."""
    from trainfit.spec import TrainSpec

    return TrainSpec(
        model=args.model,
        seq_len=args.seq,
        inputs=tuple(args.input),
        multiplier=args.multiplier,
        loss=args.loss,
        step_fn=args.step_fn,
        task=args.task,
    )


def serving_rows(args: argparse.Namespace, spec: object, devices: tuple[str, ...]) -> tuple:
    """The report's inference rows of `spec` on `devices` (generation for a causal LM, one
    forward for any other model; what trainfit does not estimate is a row saying why)."""
    from trainfit.estimator.forward import estimate_serving
    from trainfit.report.document.serving import inference_rows

    return inference_rows(
        estimate_serving(
            spec,  # type: ignore[arg-type]
            devices=devices,
            precisions=_precisions(args),  # type: ignore[arg-type]
            batches=args.batch or [1],
            context=args.context,
            new_tokens=args.new_tokens,
        )
    )


def print_rows(rows: tuple) -> None:
    """The inference rows as a table on stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Inference")
    header = ("device", "kind", "precision", "batch", "memory GiB", "fits", "total ms", "tok/s")
    for name in (*header, "note"):
        table.add_column(name)
    for r in rows:
        table.add_row(
            r.device, r.kind, r.precision, str(r.batch),
            "-" if r.memory_gib is None else f"{r.memory_gib:.2f}",
            "-" if r.fits is None else ("yes" if r.fits else "no"),
            "-" if r.total_ms is None else f"{r.total_ms:,.3g}",
            "-" if r.decode_tokens_per_second is None else f"{r.decode_tokens_per_second:,.4g}",
            r.note,
        )  # fmt: skip
    Console().print(table)


def run_inference(args: argparse.Namespace, devices: tuple[str, ...]) -> int:
    """Serving only (no effective batch): estimate every (device, precision, batch) and print
    the tables or JSON; with --report, write a report of the inference section only."""
    from trainfit.cli import report_args
    from trainfit.errors import SpecError
    from trainfit.estimator.forward import is_generative
    from trainfit.estimator.generation import estimate_inference_table

    report_args.check(args)
    spec = serving_spec(args)
    if not is_generative(spec):  # type: ignore[arg-type]
        rows = serving_rows(args, spec, devices)
        if args.json:
            import dataclasses

            print(json.dumps({"inference": [dataclasses.asdict(r) for r in rows]}, indent=2))
        else:
            print_rows(rows)
        report_args.write_serving(args, rows)
        return 0
    problems = []
    if args.context is None:
        problems.append("--inference needs --context N (prompt tokens)")
    if args.new_tokens is None:
        problems.append("--inference needs --new-tokens N (tokens generated per sequence)")
    if problems:
        raise SpecError(problems)
    precisions = _precisions(args)
    estimates = estimate_inference_table(
        args.model,
        context=args.context,
        new_tokens=args.new_tokens,
        batches=args.batch or [1],
        precisions=precisions,  # type: ignore[arg-type]
        devices=devices,
    )
    if args.json:
        print(json.dumps({"inference": [e.to_dict() for e in estimates]}, indent=2))
    else:
        from rich.console import Console

        from trainfit.report.inference import inference_renderable

        Console().print(inference_renderable(estimates))
    if getattr(args, "report", None):
        from trainfit.report.document.serving import inference_rows

        report_args.write_serving(args, inference_rows(estimates))
    return 0
