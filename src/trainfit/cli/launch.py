"""The `trainfit` command's first code (the console script and `python -m trainfit`).

Importing the command line (`trainfit.cli.main`) takes a noticeable moment; Ctrl-C in it
would print Python's traceback. Here it exits 130 with the same one line as an interrupt
anywhere later (`trainfit.cli.main.main`). None of trainfit is imported before the guard.

Known limitations: the interpreter's own start-up, and the console script's `import re`
before it calls this, are outside any of trainfit's code.
"""

from __future__ import annotations

from collections.abc import Callable


def _load() -> Callable[[], None]:
    from trainfit.cli.main import entry

    return entry


def entry() -> None:
    """Load the command line, then run it (`trainfit.cli.main.entry`); Ctrl-C while loading
    prints one line and exits 130."""
    try:
        run = _load()
    except KeyboardInterrupt:
        from trainfit.cli.interrupt import report_interrupt

        raise SystemExit(report_interrupt()) from None
    run()
