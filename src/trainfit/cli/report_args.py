"""`--report DIR` of `trainfit plan`: the option, a progress display on stderr, and the
report written after planning (the library's `trainfit.report.document`)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainfit.specfile.run import PlanResult
    from trainfit.specfile.schema import PlanFile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register `--report DIR`."""
    parser.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="write report.md, report.json, PNG plots, the config files and one self-contained "
        "report.html under DIR",
    )


@contextlib.contextmanager
def progress(shown: bool, what: str = "planning") -> Iterator[Callable[[str], None] | None]:
    """When `shown` (a report is written): show what is being done on stderr (a rich progress
    line, removed when done) and give the callback that updates it; None otherwise, so a plan
    without a report prints as before."""
    if not shown:
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(what, total=None)

    def say(text: str) -> None:
        bar.update(task, description=text)

    bar.start()
    try:
        yield say
    finally:
        bar.stop()


def write(
    directory: str | None, models: Sequence[PlanResult], plan_file: PlanFile | None = None
) -> None:
    """Build and write the report of `models` under `directory` (nothing without one)."""
    if not directory:
        return
    from pathlib import Path

    from trainfit.report.document import plan_report, write_report

    with progress(True, "report") as say:
        report = plan_report(models, plan_file, progress=say)
        written = write_report(report, Path(directory), progress=say)
    for path in written:
        if path.name in ("report.md", "report.json", "report.html"):
            print(f"wrote {path}", file=sys.stderr)
