"""A training loop's steady step time: a window of steps run back to back, with no device
synchronisation between them.

A training loop does not wait for the device after each step: the host issues step i+1 while
the device still runs step i, and waits only where it reads a value back. The estimator's step
time is that pipeline's steady period (`trainfit.timing.step`). A step timed alone, the device
synchronised at its end, adds what the loop hides: the host's issue of a device-bound step's
first kernels, or the device's work after a host-bound step's last issue. So `measure()` times
the steps both ways: each step alone (its memory per phase, its own line as it runs), then one
window of steps back to back, whose time over their count is the loop's figure.

How the window is timed: the device is synchronised, one filling step is run (the device's
queue reaches its steady state; not counted), then the window's steps one after another with
nothing that waits for the device (no memory reading at the phase marks), and the device
synchronised again (CUDA: `torch.cuda.synchronize`, MPS: `torch.mps.synchronize`). On CUDA two
device events, recorded after the filling step and after the window's last, time the device's
own timeline: the window is its steps' steady periods, without the host's issue up to the
first kernel or the last kernels' drain (as `benchmarks/steptime/window.py` reads them). Where
the backend has no timing events (MPS, the CPU) the device is synchronised after the filling
step and the host clock read at both ends. On the CPU each op runs as it is issued, so the
window and the synced steps time the same thing.

Known limitations: without device events the window's two ends add, once per window, the
host's issue up to the first kernel and the last kernels' drain, under one step's time in all,
so the figure is high by at most one step over the window's steps. One window of N steps gives
one figure, with no spread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from trainfit.measure.backend import Backend
from trainfit.progress import Activity, Part, tell

FILLING_STEPS = 1
"""Steps run before a window's first, not counted: the device's queue fills."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopWindow:
    """Steps run back to back, the device synchronised only before the first and after the
    last."""

    steps: int
    seconds: float
    """The window's time: between device events after the filling step and after the last
    (CUDA), else host wall time from the synchronisation after the filling step to the one
    after the last."""

    @property
    def step_seconds(self) -> float:
        """The loop's steady step time: the window's time over its steps."""
        return self.seconds / self.steps


def time_window(backend: Backend, step: Callable[[], None], steps: int) -> LoopWindow:
    """Run `step` once to fill the device's queue, then `steps` times back to back on
    `backend`'s device, and time those (the progress reporter told that the window starts)."""
    if steps < 1:
        raise ValueError(f"a loop window needs at least 1 step, got {steps}")
    tell(Part.MEASURE, Activity.LOOP.value, total=steps)
    events = backend.timing_events()
    backend.synchronize()
    for _ in range(FILLING_STEPS):
        step()
    if events is None:
        backend.synchronize()
    else:
        events[0].record()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if events is not None:
        events[1].record()
    backend.synchronize()
    seconds = time.perf_counter() - start
    if events is not None:
        seconds = events[0].elapsed_time(events[1]) / 1000  # NB: milliseconds
    return LoopWindow(steps=steps, seconds=seconds)
