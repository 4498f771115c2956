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


def run_inference(args: argparse.Namespace, devices: tuple[str, ...]) -> int:
    """Estimate every (device, precision, batch) and print the tables or JSON."""
    from trainfit.errors import SpecError
    from trainfit.inference import InferencePrecision, estimate_inference_table
    from trainfit.spec import parse_enum

    problems = []
    if args.context is None:
        problems.append("--inference needs --context N (prompt tokens)")
    if args.new_tokens is None:
        problems.append("--inference needs --new-tokens N (tokens generated per sequence)")
    if args.effective_batch is not None:
        problems.append("--effective-batch plans training; with --inference give --batch N")
    if problems:
        raise SpecError(problems)
    precisions = [
        parse_enum(InferencePrecision, "inference precision", p)
        for p in args.inference_precision.split(",")
        if p.strip()
    ]
    estimates = estimate_inference_table(
        args.model,
        context=args.context,
        new_tokens=args.new_tokens,
        batches=args.batch or [1],
        precisions=precisions,
        devices=devices,
    )
    if args.json:
        print(json.dumps({"inference": [e.to_dict() for e in estimates]}, indent=2))
    else:
        from rich.console import Console

        from trainfit.report.inference import inference_renderable

        Console().print(inference_renderable(estimates))
    return 0
