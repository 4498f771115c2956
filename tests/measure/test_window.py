"""The loop window: steps back to back, the device synchronised only at the window's ends; the
figure `trainfit measure` reports as the step time and compares with the estimate."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests import measure_models
from tests.measure_models import CAPPED
from trainfit.estimator.step import estimate
from trainfit.hardware.catalog import DeviceKind
from trainfit.measure.backend import CpuBackend
from trainfit.measure.compare import NoLoop, compare
from trainfit.measure.steps import measure
from trainfit.measure.window import LoopWindow, time_window
from trainfit.spec import TrainSpec


class CountingCpu(CpuBackend):
    """The CPU backend, logging each synchronisation and memory reading with the number of
    forwards run so far."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, int]] = []

    def synchronize(self) -> None:
        self.log.append(("sync", measure_models.CALLS["forward"]))

    def take_peaks(self) -> tuple[int | None, int | None, int | None]:
        self.log.append(("peaks", measure_models.CALLS["forward"]))
        return super().take_peaks()


def test_a_window_synchronises_only_before_its_first_step_and_after_its_last():
    log: list[str] = []

    class Sync(CpuBackend):
        def synchronize(self) -> None:
            log.append("sync")

    window = time_window(Sync(), lambda: log.append("step"), 3)
    # the filling step, then the window's three (no timing events: synchronised after filling)
    assert log == ["sync", "step", "sync", "step", "step", "step", "sync"]
    assert window.steps == 3 and window.seconds > 0
    assert window.step_seconds == window.seconds / 3
    with pytest.raises(ValueError, match="at least 1 step, got 0"):
        time_window(Sync(), lambda: None, 0)


def test_measure_times_the_loop_from_steps_with_no_synchronisation_or_reading_between():
    backend, told = CountingCpu(), []
    m = measure(
        TrainSpec(**CAPPED), steps=2, warmup=1, loop_steps=3, backend=backend, on_loop=told.append
    )
    assert told == [m.loop]
    syncs = [n for what, n in backend.log if what == "sync"]
    first = syncs[0]  # forwards before the steps (none expected, but not assumed)
    # setup, after each of the 3 synced steps, then the window: one before its filling step,
    # one after it, one after its 3 forwards
    assert [n - first for n in syncs] == [0, 1, 2, 3, 3, 4, 7]
    inside = [what for what, n in backend.log if first + 4 < n < first + 7]
    assert inside == []  # neither a sync nor a memory reading inside the window
    assert m.loop is not None and m.loop.steps == 3
    assert m.loop_step_seconds == m.loop.seconds / 3
    assert m.samples_per_second == pytest.approx(4 / m.loop_step_seconds)
    assert len(m.step_seconds) == 2 and m.steps == 2  # the synced ones, as before
    assert {p.iteration for p in m.phases} == {0, 1, 2}  # the window's steps read no phases


def test_the_json_says_which_time_is_which():
    m = measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu")
    data = json.loads(json.dumps(m.to_dict()))
    assert data["loop_steps"] == 2  # as many as the synced steps by default
    assert data["loop_step_seconds"] == pytest.approx(data["loop_seconds"] / 2)
    assert data["median_step_seconds"] == m.median_step_seconds  # the synced median
    assert data["samples_per_second"] == pytest.approx(4 / data["loop_step_seconds"])
    none = measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu", loop_steps=0)
    assert none.loop is None and none.samples_per_second is None
    assert none.to_dict()["loop_step_seconds"] is None


def test_the_comparison_uses_the_loop_figure_not_the_synced_median():
    spec = TrainSpec(**CAPPED)
    result = estimate(spec)
    m = measure(spec, steps=2, warmup=1, device="cpu")
    timed = dataclasses.replace(m, step_seconds=(9.0, 11.0), loop=LoopWindow(steps=4, seconds=2.0))
    comparison = compare(result, timed)
    row = comparison.row("step time (loop)")
    assert row.measured == 0.5 and row.estimated == result.step_time.seconds
    assert comparison.row("throughput").measured == 4 / 0.5
    untimed = compare(result, dataclasses.replace(m, loop=None))
    assert not [r for r in untimed.rows if r.unit != "bytes"]  # nothing synced compared
    assert NoLoop() in untimed.notes


def test_ctrl_c_in_the_window_keeps_the_synced_steps_and_gives_no_loop_figure():
    measure_models.LIMITS["interrupt_after"] = 4  # 1 warm-up + 2 synced, then 1 in the window
    m = measure(TrainSpec(**CAPPED), steps=2, warmup=1, device="cpu")
    assert m.interrupted and m.steps == 2 and m.loop is None


def test_the_windows_memory_peaks_count_in_the_runs_peaks():
    class Card(CpuBackend):
        """Allocator counters that peak only once the window has run (3 synced forwards)."""

        kind = DeviceKind.CUDA

        def reserved(self) -> int | None:
            return 1000

        def take_peaks(self) -> tuple[int | None, int | None, int | None]:
            late = measure_models.CALLS["forward"] > 3
            return (700, 1500, 1600) if late else (100, 1000, 1100)

    m = measure(TrainSpec(**CAPPED), steps=2, warmup=1, backend=Card())
    assert m.loop is not None
    assert (m.peak_allocated_bytes, m.peak_reserved_bytes, m.peak_used_bytes) == (700, 1500, 1600)
    assert m.device_needed_bytes == 1500 + (1600 - 1000)
    assert max(p.peak_allocated_bytes for p in m.phases) == 100  # not a phase of a synced step


def test_an_error_in_the_loop_callback_is_raised_as_itself():
    def broken(window: LoopWindow) -> None:
        raise KeyError("the caller's bug")

    with pytest.raises(KeyError, match="the caller's bug"):
        measure(TrainSpec(**CAPPED), steps=1, warmup=1, device="cpu", on_loop=broken)


class _Event:
    """A device event on a fake clock: the time it was recorded at."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.at = clock, None

    def record(self) -> None:
        self.at = self.clock[0]

    def elapsed_time(self, end: _Event) -> float:
        return (end.at - self.at) * 1000


def test_with_device_events_the_window_is_timed_from_after_its_filling_step():
    clock, log = [0.0], []

    class Card(CpuBackend):
        def synchronize(self) -> None:
            log.append("sync")

        def timing_events(self):
            return _Event(clock), _Event(clock)

    def step() -> None:  # NB: each step advances the device's clock by 10 ms
        log.append("step")
        clock[0] += 0.010

    window = time_window(Card(), step, 4)
    assert log == ["sync", "step", "step", "step", "step", "step", "sync"]  # no sync inside
    assert window.steps == 4 and window.seconds == pytest.approx(0.040)  # the filling one not
