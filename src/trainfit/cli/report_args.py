"""`--report DIR` of `trainfit plan`: the option, a progress display on stderr, and the
report written after planning (the library's `trainfit.report.document`)."""

from __future__ import annotations

import argparse
import atexit
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainfit.plan.core import Plan
    from trainfit.plan.stages import StagedPlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register `--report DIR`."""
    parser.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="write report.md, report.json, PNG plots, the config files and one self-contained "
        "report.html under DIR",
    )


def check(args: argparse.Namespace) -> None:
    """Before planning (which takes seconds): the report directory can be written."""
    if getattr(args, "report", None):
        from trainfit.export.core import check_directory

        check_directory(args.report, "report directory")


_LIVE: list[object] = []
"""The progress display started by `start` (at most one), stopped by `stop`."""

_PENDING: dict[str, dict[int, tuple[Sequence[object], str, tuple[object, ...]]]] = {}
"""A spec file's plans so far, per report directory: {model index: (plans, model name,
inference rows)}."""


def start(args: argparse.Namespace, what: str = "planning") -> Callable[[str], None] | None:
    """With --report: show what is being done on stderr (a rich progress line, removed when
    done) and return the callback that updates it; None without --report, so a plan without
    a report prints as before."""
    if not getattr(args, "report", None):
        return None
    if _LIVE:
        return _LIVE[1]  # type: ignore[return-value]
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
    _LIVE[:] = [bar, say]
    atexit.register(stop)  # NB: also on an error, which the CLI turns into one line
    return say


def stop() -> None:
    """Remove the progress display, if one is shown."""
    if _LIVE:
        bar = _LIVE[0]
        _LIVE.clear()
        bar.stop()  # type: ignore[attr-defined]


def write_serving(args: argparse.Namespace, rows: Sequence[object]) -> None:
    """`write` for a serving-only plan (no training plan): the report's inference section."""
    from trainfit.cli.inference import serving_spec
    from trainfit.estimator.forward import parameter_count
    from trainfit.report.document import ServingOnly

    if not getattr(args, "report", None):
        return
    spec = serving_spec(args)
    one = ServingOnly(model=args.model, parameters=parameter_count(spec))  # type: ignore[arg-type]
    write(args, [one], inference=tuple(rows))  # type: ignore[list-item]


def write(
    args: argparse.Namespace,
    plans: Sequence[Plan | StagedPlan],
    names: Sequence[str] | None = None,
    inference: tuple[object, ...] = (),
) -> None:
    """Build and write the report of `plans` under `args.report` (nothing without it).

    The title, description and claims come from `args.spec_file` (a spec file's PlanFile)
    when there is one; exports asked for with --export go under DIR/configs too; `inference`
    (InferenceRows) is the report's inference table of the (one) model planned."""
    directory = getattr(args, "report", None)
    if not directory:
        return
    from pathlib import Path

    from trainfit.report.document import build_report, write_report

    spec_file = getattr(args, "spec_file", None)
    index = getattr(args, "spec_index", None)
    if names is None and index is not None and hasattr(spec_file, "entries"):
        # NB: `cli.spec_file.run` plans a file's models one after another; their report is one,
        # written when the last model is planned, each model under its entry's name (the name
        # the claims use)
        key = str(Path(directory).resolve())
        if index == 0:
            _PENDING.pop(key, None)
        pending = _PENDING.setdefault(key, {})
        pending[index] = (plans, args.spec_model, inference)
        if len(pending) < len(spec_file.entries()):
            return
        del _PENDING[key]
        plans = [plan for index in sorted(pending) for plan in pending[index][0]]  # type: ignore[misc]
        names = [pending[index][1] for index in sorted(pending) for _ in pending[index][0]]
        tables = [pending[index][2] for index in sorted(pending) for _ in pending[index][0]]
    else:
        tables = [inference for _ in plans]
    say = start(args, "report")
    try:
        report = build_report(
            plans,
            title=getattr(spec_file, "title", None) or None,
            description=getattr(spec_file, "description", None) or "",
            claims=getattr(spec_file, "claims", None) or (),
            names=names,
            inference=tables if any(tables) else None,  # type: ignore[arg-type]
            exports=tuple(getattr(args, "export", None) or ()),
            progress=say,
        )
        written = write_report(report, Path(directory), progress=say)
    finally:
        stop()
    for path in written:
        if path.name in ("report.md", "report.json", "report.html"):
            print(f"wrote {path}", file=sys.stderr)
