"""The command line's progress display: a `trainfit.progress.Reporter` that shows what is being
done as one rich status line on stderr (a spinner, the parts under way, the seconds so far),
on a terminal only, never with --json; removed when done or before anything is printed."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainfit.progress import PARTS, Event, Part, reporting

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID


def shown(json: bool = False, stream: object = None) -> bool:
    """Whether to show progress: on a terminal (stderr), and not for JSON output."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return not json and callable(isatty) and bool(isatty())


class StatusLine:
    """A `Reporter`: the parts under way as a transient rich progress line on `console`
    (default: stderr). `stop` removes the line; the next event shows it again."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console
        self.text = ""
        """The line last shown."""
        self._parts: dict[Part, Event] = {}
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __call__(self, event: Event, /) -> None:
        from trainfit.report.progress import progress_text

        depth = PARTS.index(event.part)
        self._parts = {p: e for p, e in self._parts.items() if PARTS.index(p) < depth}
        self._parts[event.part] = event
        text = self.text = progress_text([self._parts[p] for p in PARTS if p in self._parts])
        if self._bar is None or self._task is None:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self._console or Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task(text, total=None)
            self._bar.start()
        self._bar.update(self._task, description=text)

    def say(self, text: str) -> None:
        """A report's own words (`trainfit.report.document` tells its parts as text)."""
        self(Event(part=Part.REPORT, name=text.removeprefix("report: ")))

    def stop(self) -> None:
        """Remove the line, if shown (the parts under way are kept for the next event)."""
        if self._bar is not None:
            self._bar.stop()
        self._bar = self._task = None


@contextlib.contextmanager
def status(enabled: bool) -> Iterator[StatusLine | None]:
    """While the block runs: a `StatusLine` in effect as the reporter (`trainfit.progress`)
    when `enabled` (see `shown`), removed at the end; None otherwise."""
    if not enabled:
        yield None
        return
    line = StatusLine()
    try:
        with reporting(line):
            yield line
    finally:
        line.stop()
