"""Replay a traced step through the caching allocator and read the peak and its breakdown."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainfit.memory.allocator import CachingAllocator
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
    """
    nbytes = sizes if sizes is not None else [event.nbytes for event in trace.events]
    alloc = allocator(capacity)
    malloc, free = alloc.malloc, alloc.free
    sizes_of: dict[int, int] = {}
    live: dict[str, int] = {}
    category_of: dict[int, str] = {}
    workspace_at = {w.index: w for w in trace.workspaces}
    best = -1
    best_state: tuple[Phase, int, str, dict[str, int]] = (Phase.SETUP, 0, "", {})
    handle = -1
    names = trace.category_names()
    for index, event in enumerate(trace.events):
        if index in workspace_at:
            live[WORKSPACES] = live.get(WORKSPACES, 0) + malloc(handle, workspace_bytes)
            handle -= 1
        if event.alloc:
            name = names[index]
            if name is None or nbytes[index] == 0:
                continue
            key = event.key
            size = malloc(key, nbytes[index])
            sizes_of[key] = size
            category_of[key] = name
            live[name] = live.get(name, 0) + size
            if alloc.allocated > best:
                best = alloc.allocated
                best_state = (event.phase, event.iteration, event.op, dict(live))
        elif event.key in sizes_of:
            key = event.key
            free(key)
            live[category_of.pop(key)] -= sizes_of.pop(key)
    phase, iteration, op, at_peak = best_state
    return Replay(
        peak_allocated_bytes=alloc.peak_allocated,
        peak_reserved_bytes=alloc.peak_reserved,
        peak_phase=phase,
        peak_iteration=iteration,
        peak_op=op,
        live_at_peak=at_peak,
        segments=alloc.segments,
    )
