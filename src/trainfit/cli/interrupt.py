"""Ctrl-C that is never swallowed: a SIGINT handler that raises KeyboardInterrupt, but not
inside a finaliser.

Python raises KeyboardInterrupt wherever the main thread is when the signal is handled. In a
weakref callback or a `__del__` (the tracer records every free through a weakref finaliser),
the interpreter cannot raise it: it prints "Exception ignored in ... KeyboardInterrupt" and
runs on. The handler here sees such a frame on the stack and asks again a few milliseconds
later (SIGALRM), until the interrupt lands in ordinary code.

Known limitations: the deferral needs `signal.setitimer` (not on Windows, where the
interrupt is raised where it lands); only the main thread handles signals.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import weakref
from collections.abc import Iterator
from types import FrameType

INTERRUPTED = 130
"""The exit code of an interrupted command (128 + SIGINT), wherever it is interrupted."""
RETRY_SECONDS = 0.005
"""How soon an interrupt that landed in a finaliser is tried again."""

_FINALISERS = frozenset({weakref.finalize.__call__.__code__})


def in_finaliser(frame: FrameType | None) -> bool:
    """Whether `frame` or a frame below it on the stack is a finaliser (a weakref.finalize
    callback or a `__del__`), where an exception would be printed and ignored."""
    while frame is not None:
        if frame.f_code in _FINALISERS or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _raise(signum: int, frame: FrameType | None) -> None:
    if hasattr(signal, "setitimer") and in_finaliser(frame):
        signal.signal(signal.SIGALRM, _raise)
        signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts_raised() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt in the block, never inside a finaliser; the previous
    handlers are put back afterwards (a block outside the main thread is left as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _raise)
    alarm = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    try:
        yield
    finally:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm)
        signal.signal(signal.SIGINT, previous)


def report_interrupt() -> int:
    """Say in one line that the command was interrupted; its exit code."""
    sys.stderr.write("trainfit: interrupted\n")
    return INTERRUPTED
