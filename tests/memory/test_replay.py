"""Replays kept on the trace: the same answer as a replay made, for every capacity."""

from __future__ import annotations

import pytest

from trainfit import TrainSpec
from trainfit.memory import replay as replay_module
from trainfit.memory.allocator import CachingAllocator, OutOfMemory
from trainfit.memory.mps_allocator import MpsAllocator
from trainfit.memory.replay import replay
from trainfit.trace.step import StepTrace, trace_step


@pytest.fixture(scope="module")
def trace() -> StepTrace:
    return trace_step(TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=64))


def _made(trace: StepTrace, capacity: int | None, sizes: list[int] | None, allocator: type) -> str:
    try:
        return repr(replay_module._replay(trace, 1 << 20, capacity, sizes, allocator))
    except OutOfMemory as exc:
        return f"out of memory: {exc}"


def _kept(trace: StepTrace, capacity: int | None, sizes: list[int] | None, allocator: type) -> str:
    try:
        return repr(replay(trace, 1 << 20, capacity, sizes, allocator))
    except OutOfMemory as exc:
        return f"out of memory: {exc}"


@pytest.mark.parametrize("allocator", [CachingAllocator, MpsAllocator])
def test_kept_replays_equal_made_ones(trace: StepTrace, allocator: type) -> None:
    trace.replays.clear()
    peak = replay(trace, 1 << 20, None, None, allocator).peak_reserved_bytes
    doubled = [2 * e.nbytes for e in trace.events]
    capacities = [None, peak, peak - 1, peak // 2, 1 << 20, 4 * peak, peak - 1]
    answers = set()
    for sizes in (None, doubled, doubled):
        for capacity in capacities:
            kept = _kept(trace, capacity, sizes, allocator)
            assert kept == _made(trace, capacity, sizes, allocator)
            answers.add(kept.startswith("out of memory"))
    assert answers == {True, False}  # NB: some fit, some do not


def test_a_replay_is_made_once(trace: StepTrace, monkeypatch: pytest.MonkeyPatch) -> None:
    trace.replays.clear()
    made = []
    real = replay_module._replay

    def counted(*args: object) -> object:
        made.append(args[2])
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(replay_module, "_replay", counted)
    first = replay(trace, 1 << 20)
    first.live_at_peak.clear()  # NB: a caller's change does not reach the kept replay
    again = replay(trace, 1 << 20, first.peak_reserved_bytes)
    assert again.live_at_peak and again.peak_reserved_bytes == first.peak_reserved_bytes
    with pytest.raises(OutOfMemory):
        replay(trace, 1 << 20, 1024)
    with pytest.raises(OutOfMemory):
        replay(trace, 1 << 20, 1024)
    assert made == [None, 1024]
