"""The CPU as a target: the resident memory one training step adds to the process.

*Memory needed* on the CPU is the peak increase of the process's resident set size (RSS) over
its RSS just before the model is built, with torch, transformers and the model's own modules
already imported: the model's parameters, gradients, optimizer state, activations and
temporaries as glibc malloc holds them, plus the CPU runtime's first-use memory.

The step is traced as stock CPU PyTorch runs it (`Target.cpu()`): real CPU autocast, the CPU's
SDPA and dropout kernels, the for-loop optimizer path, no cuBLAS workspaces. The tensors are
replayed through a model of glibc malloc (`trainfit.memory.malloc`): no caching allocator; big
blocks are mapped and unmapped, small ones stay in the heap.

Its step time is modelled op by op for this host's CPU (`trainfit.timing.cpu`, from the CPU
features `trainfit.hardware.cpu_features` reads), whatever RAM a catalog row gives it.

Known limitations: the malloc model is glibc's (Linux); macOS's and musl's allocators are not
modelled (the estimate on those is labelled modelled). Memory of other processes, the page
cache and the data loader are not counted. The runtime constant is fitted on one 2-core host.
"""

from __future__ import annotations

import dataclasses
import sys

from trainfit.estimator.labels import FigureLabel, How
from trainfit.estimator.result import Breakdown, Estimate, EstimateNote, NoHostRam, assemble
from trainfit.hardware.catalog import Device
from trainfit.hardware.cpu_features import CpuFeatures, cpu_features
from trainfit.hardware.host import total_ram_bytes
from trainfit.memory.host import CPU_HEAP_SLACK, CPU_RUNTIME_BYTES, replay_host
from trainfit.provenance import Provenance
from trainfit.spec import TrainSpec
from trainfit.timing.cpu import cpu_step_time
from trainfit.timing.missing import NoStepTime, NoTime, RateMissing, not_modelled
from trainfit.timing.step import StepTime
from trainfit.trace.step import Category, StepTrace, trace_step
from trainfit.trace.target import Target


def estimate_cpu(
    spec: TrainSpec, device: Device, started: float, features: CpuFeatures | None = None
) -> Estimate:
    """The Estimate of `spec` on the CPU `device` (see the module docstring); `features`
    describe the host's CPU (None: read them here)."""
    trace = trace_step(spec, target=Target.cpu())
    estimate = _memory(spec, device, started, trace)
    step, why = cpu_time(trace, spec, features or cpu_features())
    return dataclasses.replace(estimate, step_time=step, step_time_missing=why)


def cpu_time(
    trace: StepTrace, spec: TrainSpec, features: CpuFeatures
) -> tuple[StepTime | None, NoStepTime | None]:
    """The modelled step time of a CPU trace on this host, or None and why not."""
    if trace.costs is None:
        return None, NoStepTime(why=NoTime.NO_OP_COSTS)
    try:
        return cpu_step_time(trace.costs, spec, features, trace.tokens_per_sample), None
    except RateMissing as exc:
        return None, not_modelled(exc)


def _memory(spec: TrainSpec, device: Device, started: float, trace: StepTrace) -> Estimate:
    """The Estimate's memory figures (no step time yet)."""
    result = replay_host(trace)
    live = result.live_at_peak
    tensors = sum(live.values())
    slack = int(result.peak_reserved_bytes * CPU_HEAP_SLACK)
    breakdown = Breakdown(
        parameters=live.get(Category.PARAMETERS.value, 0),
        gradients=live.get(Category.GRADIENTS.value, 0),
        optimizer_state=live.get(Category.OPTIMIZER_STATE.value, 0),
        activations=live.get(Category.ACTIVATIONS.value, 0),
        temporaries=live.get(Category.TEMPORARIES.value, 0),
        workspaces=0,
        allocator_overhead=result.peak_reserved_bytes - tensors + slack,
        runtime_context=CPU_RUNTIME_BYTES,
    )
    needed = result.peak_reserved_bytes + slack + CPU_RUNTIME_BYTES
    ram = device.memory_bytes or total_ram_bytes()
    notes: list[EstimateNote] = list(trace.notes)
    if ram is None:
        notes.append(NoHostRam())
    elif not device.memory_bytes:
        device = dataclasses.replace(device, memory_bytes=ram)
    glibc = sys.platform.startswith("linux")
    labels = {
        "device_memory_needed_bytes": FigureLabel(Provenance.SIMULATED, How.RSS_INCREASE),
        "peak_allocated_bytes": FigureLabel(Provenance.TRACED, How.TRACED),
        "peak_reserved_bytes": (
            FigureLabel(Provenance.SIMULATED, How.GLIBC_REPLAY)
            if glibc
            else FigureLabel(Provenance.MODELLED, How.GLIBC_ELSEWHERE)
        ),
        "runtime_context": FigureLabel(Provenance.MEASURED, How.CPU_CONTEXT),
        "allocator_overhead": FigureLabel(Provenance.SIMULATED, How.HEAP_ROUNDING),
    }
    fits = needed <= ram if ram else None
    return assemble(spec, device, trace, result, needed, breakdown, fits, labels, started, notes)
