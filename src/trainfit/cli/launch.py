"""The `trainfit` command's first code (the console script and `python -m trainfit`).

Importing the command line (`trainfit.cli.main`) takes a noticeable moment; Ctrl-C in it
would print Python's traceback, or leave a library half imported. Here it waits for the import
under way to finish (`trainfit.cli.interrupt`), then exits 130 with the same one line as an
interrupt anywhere later (`trainfit.cli.main.main`). Only that small module of trainfit is
imported before the guard.

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
    from trainfit.cli import interrupt

    try:
        with interrupt.interrupts_raised():
            run = _load()
    except KeyboardInterrupt:
        raise SystemExit(interrupt.report_interrupt()) from None
    except Exception:
        if not interrupt.interrupt_requested():
            raise
        # NB: a library interrupted mid-way fails in its own way
        raise SystemExit(interrupt.report_interrupt()) from None
    run()
