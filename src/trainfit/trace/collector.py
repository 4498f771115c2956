"""Python's cyclic garbage collector paused while a block makes many objects.

A finished trace holds tens of thousands of events. In a process that imported torch and
transformers, with a plan's traces alive, each collection of the oldest generation walks all
of them (about a quarter of a second with a 7B plan's traces), and stamping a trace, reading
a stored one or counting a model's parameters make enough objects to trigger such
collections again and again: a quarter of a 7B plan's CPU went to them. Nothing trainfit
works out depends on when the collector runs (a trace pauses it while it records frees:
`trainfit.trace.context`), so pausing it changes no figure; the reference cycles made
meanwhile are collected once it runs again.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block, then on again where it was on (nested blocks
    and a process that turned it off, as the CLI does, are left as they are)."""
    if not gc.isenabled():
        yield
        return
    try:
        gc.disable()  # NB: inside the try: an interrupt just after it still turns it on again
        yield
    finally:
        gc.enable()
