"""The first code of a plan's worker process, run before it imports torch (this module imports
nothing heavy: `ProcessPoolExecutor` imports an initializer's module when the process starts,
the modules of its tasks only when it runs them)."""

from __future__ import annotations

import gc
import signal


def start_worker() -> None:
    """The worker's start: SIGINT ignored (the planning process handles Ctrl-C and ends the
    worker; the worker's own KeyboardInterrupt would print a traceback of its own), and the
    cyclic garbage collector off for the worker's life, as the CLI runs its own process
    (`trainfit.cli.main.entry`): importing torch and transformers makes about a million
    objects, and the collections they trigger cost the worker about 0.6 s of CPU. No figure
    depends on when the collector runs (`trainfit.trace.collector`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.disable()
