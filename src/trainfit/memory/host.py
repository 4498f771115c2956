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

CPU_RUNTIME_BYTES = int(83.1 * MiB)
"""Resident memory a first training step adds beyond its tensors and their heap: the OpenMP
thread pool, MKL's and oneDNN's lazily allocated buffers and JIT kernels, autograd's graph
nodes and Python objects.

NB: fitted on one case, emotion-mlp-fp32 of benchmarks/accuracy_cpu (a 0.23M-parameter MLP:
measured +90.3 MiB RSS, replayed tensors 7.2 MiB), on a 2-core AMD EPYC, Linux, glibc 2.36,
torch 2.13.0+cpu. Held-out small models show 40-50 MiB; it depends on which libraries the
step wakes up and on the thread count."""

CPU_HEAP_SLACK = 0.0956
"""Resident memory beyond the replayed heap, as a fraction of it: heap fragmentation caused by
allocations the trace does not see (Python objects, autograd nodes, library buffers)
interleaved with the tensors'.

NB: fitted on one case, gpt2-fp32 of benchmarks/accuracy_cpu (measured +2589.7 MiB RSS,
replay 2287.8 MiB, less CPU_RUNTIME_BYTES). The real allocation sequence of that step, taken
from the profiler and replayed through the real glibc, peaks at 2292.9 MiB: the rest comes
from memory outside PyTorch's CPU allocator."""


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
