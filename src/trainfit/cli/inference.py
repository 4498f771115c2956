"""`trainfit plan MODEL --inference ...`: generation memory and latency per device and precision."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainfit.cli import help as helps

if TYPE_CHECKING:
    from trainfit.report.document.model import InferenceRow


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `--inference` options of `trainfit plan` (its inference group)."""
    group = helps.group(parser, helps.INFERENCE)
    group.add_argument(
        "--inference",
        action="store_true",
        help="plan greedy generation (KV cache, prefill, decode) instead of training",
    )
    group.add_argument(
        "--context", type=int, default=None, help="prompt tokens (required with --inference)"
    )
    group.add_argument(
        "--new-tokens",
        type=int,
        default=None,
        help="tokens generated per sequence (required with --inference)",
    )
    group.add_argument(
        "--inference-precision",
        default="bf16",
        metavar="bf16,int8,int4",
        help="weight precisions to plan, comma-separated: fp16, bf16, int8, int4 (modelled)",
    )
    group.add_argument(
        "--infer-batch",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="sequences generated together (--inference; repeatable, default 1); the training "
        "micro-batch is --batch of `trainfit estimate`",
    )


def print_rows(rows: Sequence[InferenceRow]) -> None:
    """The inference rows as a table on stdout."""
    from rich.console import Console

    from trainfit.report.tables import FitTable

    table = FitTable(title="Inference")
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
