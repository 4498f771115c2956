"""Replay a traced step through the caching allocator and read the peak and its breakdown."""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.memory.allocator import CachingAllocator
from trainfit.trace.step import Category, StepTrace
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


def replay(trace: StepTrace, workspace_bytes: int, capacity: int | None = None) -> Replay:
    """Run the trace's events through a CachingAllocator, inserting library workspaces.

    With a `capacity` (bytes the allocator may reserve), the native out-of-memory retry is
    replayed too, and `OutOfMemory` is raised when the step cannot run in that capacity.
    """
    alloc = CachingAllocator(capacity)
    sizes: dict[int, int] = {}
    live: dict[str, int] = {}
    category_of: dict[int, str] = {}
    workspace_at = {w.index: w for w in trace.workspaces}
    best = -1
    best_state: tuple[Phase, int, str, dict[str, int]] = (Phase.SETUP, 0, "", {})
    handle = -1
    for index, event in enumerate(trace.events):
        if index in workspace_at:
            live[WORKSPACES] = live.get(WORKSPACES, 0) + alloc.malloc(handle, workspace_bytes)
            handle -= 1
        if event.alloc:
            category = trace.category(event)
            if category is Category.HOST or event.nbytes == 0:
                continue
            size = alloc.malloc(event.key, event.nbytes)
            sizes[event.key] = size
            name = category.value
            category_of[event.key] = name
            live[name] = live.get(name, 0) + size
            if alloc.allocated > best:
                best = alloc.allocated
                best_state = (event.phase, event.iteration, event.op, dict(live))
        elif event.key in sizes:
            alloc.free(event.key)
            name = category_of.pop(event.key)
            live[name] -= sizes.pop(event.key)
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
