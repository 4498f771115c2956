"""`--report DIR` of `trainfit plan`: the option, and the report written after planning (the
library's `trainfit.report.document`), with its progress on a terminal."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainfit.cli import help as helps

if TYPE_CHECKING:
    from pathlib import Path

    from trainfit.io import StagedDirectories
    from trainfit.specfile.run import PlanResult
    from trainfit.specfile.schema import PlanFile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register `--report DIR` (output group)."""
    helps.group(parser, helps.OUTPUT).add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="write report.md, report.json, PNG plots, the config files and one self-contained "
        "report.html under DIR",
    )


def write(
    directory: str | None,
    models: Sequence[PlanResult],
    outputs: StagedDirectories,
    plan_file: PlanFile | None = None,
    *,
    show: bool = False,
) -> list[Path]:
    """Build and write the report of `models` under `directory` (nothing without one), into
    the staged `outputs`; `show`: its progress on stderr (`trainfit.cli.progress`). Returns
    the paths of report.md, report.json and report.html as they will be once committed."""
    if not directory:
        return []
    from trainfit.cli.progress import status
    from trainfit.report.document import plan_report, write_report

    with status(show) as line:
        say = line.say if line is not None else None
        report = plan_report(models, plan_file, progress=say)
        written = write_report(report, outputs.path(directory), progress=say)
    names = ("report.md", "report.json", "report.html")
    return [outputs.final(path) for path in written if path.name in names]


def print_written(paths: Sequence[Path]) -> None:
    """One `wrote PATH` line each on stderr."""
    for path in paths:
        print(f"wrote {path}", file=sys.stderr)
