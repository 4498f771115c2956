"""Replay a step traced for the CPU through glibc malloc, and the CPU runtime's own memory.

What the CPU target needs is the increase of the process's resident set (RSS) over its RSS
just before the model is built (all imports done): the model's tensors as glibc malloc holds
them (`trainfit.memory.malloc`), plus what PyTorch's CPU runtime touches the first time a
step runs, which no trace shows.
"""

from __future__ import annotations

from trainfit.memory.malloc import GlibcHeap
from trainfit.memory.replay import Replay
from trainfit.trace.step import Category, StepTrace
from trainfit.training import Phase

MiB = 1 << 20

CPU_RUNTIME_BYTES = 0 * MiB
"""Resident memory a first training step adds beyond its tensors: the OpenMP thread pool
(stacks and its threads' malloc arenas), oneDNN's JIT-compiled kernels and primitive cache,
autograd's graph nodes and Python objects.

NB: a constant, fitted on the CPU accuracy suite's FIT cases (benchmarks/accuracy_cpu/cases.py)
on a 2-core x86-64 Linux host (glibc 2.36, torch 2.13.0+cpu); it grows with the thread count
and differs by CPU (oneDNN's kernels depend on the ISA)."""


def replay_host(trace: StepTrace) -> Replay:
    """Run the trace's events through a GlibcHeap; the breakdown is taken at the RSS peak."""
    heap = GlibcHeap()
    sizes: dict[int, int] = {}
    live: dict[str, int] = {}
    category_of: dict[int, str] = {}
    best = -1
    best_state: tuple[Phase, int, str, dict[str, int]] = (Phase.SETUP, 0, "", {})
    # NB: library workspaces recorded for CUDA (cuBLAS handles) do not exist on the CPU;
    # oneDNN's scratchpads are part of CPU_RUNTIME_BYTES.
    for event in trace.events:
        if event.alloc:
            if event.nbytes == 0:
                continue
            category = trace.category(event)
            if category is Category.HOST:
                # the optimizer's step counters live in host memory like everything else
                category = Category.OPTIMIZER_STATE
            heap.malloc(event.key, event.nbytes)
            sizes[event.key] = event.nbytes
            name = category.value
            category_of[event.key] = name
            live[name] = live.get(name, 0) + event.nbytes
            if heap.resident > best:
                best = heap.resident
                best_state = (event.phase, event.iteration, event.op, dict(live))
        elif event.key in sizes:
            heap.free(event.key)
            name = category_of.pop(event.key)
            live[name] -= sizes.pop(event.key)
    phase, iteration, op, at_peak = best_state
    return Replay(
        peak_allocated_bytes=heap.peak_allocated,
        peak_reserved_bytes=heap.peak_resident,
        peak_phase=phase,
        peak_iteration=iteration,
        peak_op=op,
        live_at_peak=at_peak,
        segments=0,
    )
