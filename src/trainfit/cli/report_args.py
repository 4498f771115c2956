"""`--report DIR` of `trainfit plan`: the option, a progress display on stderr, and the
report written after planning (the library's `trainfit.report.document`)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress, TaskID

    from trainfit.io import StagedDirectories
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


class ProgressLine:
    """What is being done, as a rich progress line on stderr (removed when done): started
    when first told, stopped by `stop` (before anything else is printed)."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __call__(self, text: str) -> None:
        if self._bar is None or self._task is None:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task(text, total=None)
            self._bar.start()
        self._bar.update(self._task, description=text)

    def stop(self) -> None:
        """Remove the line, if shown."""
        if self._bar is not None:
            self._bar.stop()
        self._bar = self._task = None


@contextlib.contextmanager
def progress(shown: bool, what: str = "planning") -> Iterator[ProgressLine | None]:
    """When `shown` (a report is written): a progress line on stderr, removed when done;
    None otherwise, so a plan without a report prints as before."""
    if not shown:
        yield None
        return
    line = ProgressLine()
    line(what)
    try:
        yield line
    finally:
        line.stop()


def write(
    directory: str | None,
    models: Sequence[PlanResult],
    outputs: StagedDirectories,
    plan_file: PlanFile | None = None,
) -> list[Path]:
    """Build and write the report of `models` under `directory` (nothing without one), into
    the staged `outputs`; return the paths of report.md, report.json and report.html as they
    will be once committed."""
    if not directory:
        return []
    from trainfit.report.document import plan_report, write_report

    with progress(True, "report") as say:
        report = plan_report(models, plan_file, progress=say)
        written = write_report(report, outputs.path(directory), progress=say)
    names = ("report.md", "report.json", "report.html")
    return [outputs.final(path) for path in written if path.name in names]


def print_written(paths: Sequence[Path]) -> None:
    """One `wrote PATH` line each on stderr."""
    for path in paths:
        print(f"wrote {path}", file=sys.stderr)
