"""Ctrl-C that is never swallowed: a SIGINT handler that raises KeyboardInterrupt, but not
inside a finaliser nor in the middle of an import.

Python raises KeyboardInterrupt wherever the main thread is when the signal is handled. In a
weakref callback or a `__del__` (the tracer records every free through a weakref finaliser),
the interpreter cannot raise it: it prints "Exception ignored in ... KeyboardInterrupt" and
runs on. Inside an import, libraries are not written to be interrupted: a module left half
initialised turns the interrupt into an ImportError or a RecursionError a few frames later
(transformers' lazy modules, numpy's `__getattr__`), which is then reported as a crash. The
handler here sees such a frame on the stack and asks again a few milliseconds later
(SIGALRM), until the interrupt lands in ordinary code; a second Ctrl-C, or
`WAIT_LIMIT_SECONDS` of waiting, raises it where it lands. Whatever exception then comes out of
the block is the interrupt's doing (`interrupt_requested`), and the command reports it as the
interrupt.

Known limitations: the deferral needs `signal.setitimer` (not on Windows, where the
interrupt is raised where it lands); only the main thread handles signals; Ctrl-C during a
cold start waits for the import under way (a few seconds on a laptop).
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from types import FrameType

INTERRUPTED = 130
"""The exit code of an interrupted command (128 + SIGINT), wherever it is interrupted."""
RETRY_SECONDS = 0.005
"""How soon an interrupt that landed in a finaliser or an import is tried again."""
WAIT_LIMIT_SECONDS = 10.0
"""The longest an interrupt waits for ordinary code: then it is raised where it lands."""

_FINALISERS = frozenset({weakref.finalize.__call__.__code__})
_IMPORT_MACHINERY = "<frozen importlib._bootstrap"
"""The start of the file name of the interpreter's import machinery (`importlib._bootstrap`
and `importlib._bootstrap_external`), frozen into the interpreter."""


@dataclasses.dataclass(slots=True)
class _Pending:
    """The interrupt of the current block."""

    since: float | None = None
    """When the interrupt now waiting for ordinary code arrived (None when none waits)."""
    requested: bool = False
    """Whether Ctrl-C was pressed since the block began."""


_PENDING = _Pending()


def in_finaliser(frame: FrameType | None) -> bool:
    """Whether `frame` or a frame below it on the stack is a finaliser (a weakref.finalize
    callback or a `__del__`), where an exception would be printed and ignored."""
    while frame is not None:
        if frame.f_code in _FINALISERS or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def in_import(frame: FrameType | None) -> bool:
    """Whether `frame` or a frame below it on the stack is the interpreter's import machinery:
    a module is being initialised."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(_IMPORT_MACHINERY):
            return True
        frame = frame.f_back
    return False


def interrupt_requested() -> bool:
    """Whether Ctrl-C was pressed in the last `interrupts_raised` block: an exception that came
    out of it may be a library's, interrupted mid-way, rather than the command's."""
    return _PENDING.requested


def _raise(signum: int, frame: FrameType | None) -> None:
    now = time.monotonic()
    again = signum == signal.SIGINT and _PENDING.since is not None
    if _PENDING.since is None:
        _PENDING.since = now
    _PENDING.requested = True
    if (
        hasattr(signal, "setitimer")
        and not again
        and now - _PENDING.since < WAIT_LIMIT_SECONDS
        and (in_finaliser(frame) or in_import(frame))
    ):
        signal.signal(signal.SIGALRM, _raise)
        signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)
        return
    _PENDING.since = None
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts_raised() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt in the block, never inside a finaliser or an import;
    the previous handlers are put back afterwards (a block outside the main thread is left as
    it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _PENDING.since, _PENDING.requested = None, False
    previous = signal.signal(signal.SIGINT, _raise)
    alarm = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    try:
        yield
    finally:
        waiting, _PENDING.since = _PENDING.since is not None, None
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm)
        signal.signal(signal.SIGINT, previous)
        if waiting:  # NB: the block ended before the interrupt's next try: it ends here
            raise KeyboardInterrupt


def report_interrupt() -> int:
    """Say in one line that the command was interrupted; its exit code."""
    forget_unhandled_interrupt()
    sys.stderr.write("trainfit: interrupted\n")
    return INTERRUPTED


def forget_unhandled_interrupt() -> None:
    """Let the process exit with the code it chooses after catching a KeyboardInterrupt.

    NB: when the interrupt ends an evaluation of source text (`exec` or `eval` of a string:
    dataclasses and namedtuple run one while a class is being made), CPython marks it
    unhandled even once it is caught; a process started as `python -m trainfit` then ends by
    killing itself with SIGINT (exit status -2) after its exit code is chosen. The mark is
    cleared at the start of every such evaluation, so one empty evaluation clears it."""
    exec("None", {})
