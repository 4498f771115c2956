"""`write_report(report, directory)`: report.md, report.json, the plots, report.html and the
config files, written whole or not at all."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from trainfit.errors import TrainfitError, check_argument
from trainfit.report.document.model import Report
from trainfit.report.document.plots import render_plots
from trainfit.report.document.render import to_html, to_json, to_markdown


def write_report(
    report: Report, directory: Path | str, progress: Callable[[str], None] | None = None
) -> list[Path]:
    """Write the report's files under `directory` (created if needed), whole or not at all
    (`trainfit.io.atomic_directory`); return their paths (report.html last). TrainfitError
    naming a path that cannot be written."""
    check_argument("write_report", "report", report, Report, "build it with plan_report(...)")
    check_argument("write_report", "directory", directory, (str, os.PathLike), "a folder's path")
    from trainfit.io import atomic_directory

    with atomic_directory(directory) as temporary:
        written = _write_files(report, temporary, progress)
    return [Path(directory) / path.relative_to(temporary) for path in written]


def _write_files(
    report: Report, directory: Path, progress: Callable[[str], None] | None
) -> list[Path]:
    from trainfit.io import write_atomically, write_bytes_atomically

    say = progress or (lambda _: None)
    say("plotting")
    plots = render_plots(report)
    say("writing")
    texts = {f.path: f.text for m in report.models for s in m.stages for f in s.configs}
    texts["report.md"] = to_markdown(report)
    texts["report.json"] = to_json(report)
    written = []
    try:
        for relative, data in sorted(plots.items()):
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomically(path, data)
            written.append(path)
        for relative, text in sorted(texts.items()):
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
            written.append(path)
        path = directory / "report.html"
        write_atomically(path, to_html(report, plots))
    except OSError as exc:
        raise TrainfitError(f"cannot write the report under {directory}: {exc}") from exc
    return [*written, path]
