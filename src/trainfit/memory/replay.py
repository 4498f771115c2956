"""Replay a traced step through the caching allocator and read the peak and its breakdown."""

from __future__ import annotations

import dataclasses
import hashlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from trainfit.memory.allocator import CachingAllocator, OutOfMemory, RunMarks, run_stepwise
from trainfit.memory.mps_allocator import MpsAllocator
from trainfit.trace.step import StepTrace
from trainfit.training import Phase

WORKSPACES = "workspaces"


@dataclass(frozen=True, kw_only=True, slots=True)
class Replay:
    """Allocator totals of a traced step and what was live at the allocated peak."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    peak_phase: Phase
    peak_iteration: int
    peak_op: str
    live_at_peak: dict[str, int]
    """Bytes by category (Category values plus "workspaces") live at the allocated peak."""
    segments: int


def replay(
    trace: StepTrace,
    workspace_bytes: int,
    capacity: int | None = None,
    sizes: Sequence[int] | None = None,
    allocator: Callable[[int | None], CachingAllocator | MpsAllocator] = CachingAllocator,
) -> Replay:
    """Run the trace's events through an allocator (CUDA's caching allocator unless told
    otherwise: `MpsAllocator` for an Apple GPU), inserting library workspaces.

    With a `capacity` (bytes the allocator may reserve), the native out-of-memory retry is
    replayed too, and `OutOfMemory` is raised when the step cannot run in that capacity.
    `sizes` replaces each event's bytes (the same step at another micro-batch).

    A replay is a function of the trace and these arguments: its result (or its OutOfMemory)
    is kept on the trace (`StepTrace.replays`) and given again for the same arguments. A
    caching allocator that never reserved more than a `capacity` without one makes the same
    replay with it (the out-of-memory retry only runs when a new segment would pass the
    capacity), so that replay answers for every such capacity.
    """
    sized = None if sizes is None else hashlib.blake2b(array("q", sizes).tobytes()).digest()
    what = (workspace_bytes, sized, allocator)
    known = trace.replays.get((what, capacity))
    if known is None and capacity is not None and allocator is CachingAllocator:
        free = trace.replays.get((what, None))
        if isinstance(free, Replay) and free.peak_reserved_bytes <= capacity:
            known = free
    if known is None:
        try:
            known = _replay(trace, workspace_bytes, capacity, sizes, allocator)
        except OutOfMemory as exc:
            known = OutOfMemory(*exc.args)  # NB: without the traceback (the allocator)
        trace.replays[(what, capacity)] = known
    if isinstance(known, OutOfMemory):
        raise OutOfMemory(*known.args)
    assert isinstance(known, Replay)
    return dataclasses.replace(known, live_at_peak=dict(known.live_at_peak))


def _replay(
    trace: StepTrace,
    workspace_bytes: int,
    capacity: int | None,
    sizes: Sequence[int] | None,
    allocator: Callable[[int | None], CachingAllocator | MpsAllocator],
) -> Replay:
    """`replay`'s replay, made."""
    events = trace.events
    nbytes = sizes if sizes is not None else [event.nbytes for event in events]
    alloc = allocator(capacity)
    marks = RunMarks(_Mark.FREE, _Mark.WORKSPACE, workspace_bytes, WORKSPACES)
    if isinstance(alloc, CachingAllocator):
        best_at, at_peak = alloc.run(_steps(trace), nbytes, marks)
    else:
        best_at, at_peak = run_stepwise(alloc, _steps(trace), nbytes, marks)
    phase, iteration, op = Phase.SETUP, 0, ""
    if best_at >= 0:
        event = events[best_at]
        phase, iteration, op = event.phase, event.iteration, event.op
    return Replay(
        peak_allocated_bytes=alloc.peak_allocated,
        peak_reserved_bytes=alloc.peak_reserved,
        peak_phase=phase,
        peak_iteration=iteration,
        peak_op=op,
        live_at_peak=at_peak,
        segments=alloc.segments,
    )


class _Mark(Enum):
    """A replay step that is not the allocation of a storage of a category."""

    FREE = "free"
    """The event frees its storage."""
    WORKSPACE = "workspace"
    """A library workspace is allocated (key 0) before the event."""
    STEPS = "steps"
    """Not a step: the key of a trace's step list among its kept replays."""


def _steps(trace: StepTrace) -> list[tuple[int, int, str | _Mark]]:
    """What a replay does with the trace's events, worked out once per trace: per event that
    can allocate or free device memory, (event index, storage key, category value, or
    `_Mark.FREE` for a free), with a library workspace (`_Mark.WORKSPACE`, key 0) before the
    event it precedes."""
    kept = trace.replays.get(_Mark.STEPS)
    if kept is None:
        names = trace.category_names()
        workspaces = {w.index for w in trace.workspaces}
        steps: list[tuple[int, int, str | _Mark]] = []
        for index, event in enumerate(trace.events):
            if index in workspaces:
                steps.append((index, 0, _Mark.WORKSPACE))
            if not event.alloc:
                steps.append((index, event.key, _Mark.FREE))
            elif (name := names[index]) is not None:
                steps.append((index, event.key, name))
        trace.replays[_Mark.STEPS] = kept = steps
    assert isinstance(kept, list)
    return kept
