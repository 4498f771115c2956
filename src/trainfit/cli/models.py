"""`trainfit models`: the built-in model catalog as a table."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `models` subcommand."""
    sub.add_parser("models", help="list the built-in model catalog")


def run(args: argparse.Namespace) -> int:
    """Print the built-in model catalog."""
    from rich.console import Console

    from trainfit.models.catalog import catalog
    from trainfit.report.tables import FitTable

    table = FitTable(title="model catalog")
    for column in ("name", "family", "task", "source"):
        table.add_column(column)
    for row in catalog().values():
        table.add_row(row.name, row.family, row.task, row.source)
    Console().print(table)
    return 0
