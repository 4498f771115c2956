"""`estimate()`: the memory one training step needs on a target device, and where it goes.

Pipeline: spec -> trace (fake tensors, as the target would run the step) -> replay through the
target's allocator -> add the runtime's own memory -> result.

Known limitations (each also named where it is approximated):
- kernels' internal scratch buffers that no meta kernel shows are emitted by rules measured on
  an H100: cuDNN convolution workspaces (sizes fitted on a probe grid; cuDNN's algorithm choice
  is not modelled, so a few calls are mis-sized), cuDNN attention's dropout scratch; others
  (flash-attention's fp32 dq accumulator) are not in the trace;
- cuDNN's LSTM is emulated (reserve space exact, workspace size a fit); GRU, RNN, packed or
  projected LSTMs run through PyTorch's CPU decomposition;
- one CUDA stream; no `empty_cache`; allocator settings at their defaults;
- context sizes are measured on an H100 only; other GPU families reuse them (labelled modelled);
  the context does not depend on which threads use cuBLAS (one model measured 48-64 MiB less).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from trainfit.errors import SpecError
from trainfit.estimator.cpu import estimate_cpu
from trainfit.estimator.labels import FigureLabel, How
from trainfit.estimator.result import (
    AppleMemory,
    Breakdown,
    EmulatedBf16,
    Estimate,
    EstimateNote,
    assemble,
    emulated_bf16,
)
from trainfit.hardware.catalog import Device, DeviceKind, get_device
from trainfit.memory.allocator import CachingAllocator, OutOfMemory
from trainfit.memory.mps_allocator import MpsAllocator
from trainfit.memory.replay import WORKSPACES, Replay, replay
from trainfit.memory.runtime import (
    METAL_OTHER_FLOOR_BYTES,
    RuntimeProfile,
    context_bytes,
    cublas_workspace_bytes,
    profile_of,
)
from trainfit.provenance import Provenance
from trainfit.spec import Precision, TrainSpec
from trainfit.trace.recorder import Thread
from trainfit.trace.step import Category, StepTrace, trace_step
from trainfit.trace.target import Target


def gpu_memory(
    trace: StepTrace,
    spec: TrainSpec,
    device: Device,
    budget: int | None = None,
    sizes: Sequence[int] | None = None,
) -> tuple[Replay, int]:
    """The allocator replay of a GPU trace on `device`, and the runtime context beside it.

    With a `budget` (device bytes the step may use, context included) the allocator's
    out-of-memory retry is replayed, and OutOfMemory is raised when the step does not fit.
    `sizes` replaces the bytes of each event (see `memory.replay.replay`). An Apple GPU's trace
    goes through the MPS heap allocator; its runtime context is the floor Metal held beside
    PyTorch's heaps in public out-of-memory messages.
    """
    if device.kind is DeviceKind.MPS:
        context = METAL_OTHER_FLOOR_BYTES
        workspace, allocator = 0, MpsAllocator
    else:
        reduced = spec.precision in (Precision.FP16, Precision.BF16, Precision.PURE_BF16)
        context = context_bytes(
            profile_of(device),
            uses_cublas=bool(trace.workspaces),
            reduced_precision=reduced,
            backward_cublas=any(w.thread is Thread.AUTOGRAD for w in trace.workspaces),
        )
        workspace, allocator = cublas_workspace_bytes(device.compute_capability), CachingAllocator
    capacity = None if budget is None else max(0, budget - context)
    return replay(trace, workspace, capacity, sizes, allocator=allocator), context


def gpu_fits(
    trace: StepTrace,
    spec: TrainSpec,
    device: Device,
    budget: int,
    sizes: Sequence[int] | None = None,
) -> bool:
    """Whether the step runs in `budget` device bytes, the allocator's retry included."""
    try:
        gpu_memory(trace, spec, device, budget, sizes)
    except OutOfMemory:
        return False
    return True


def estimate(spec: TrainSpec | None = None, *, sample: Any = None, **kwargs: Any) -> Estimate:
    """Predict the device memory one training step of `spec` needs on `spec.device`.

    Pass a TrainSpec, or its fields as keyword arguments: `estimate(model="gpt2", batch=8)`.
    The model may be a live `nn.Module` with its `sample` batch (a tensor, a tuple ending in
    the target, or a dict of tensors), and then `loss` and `step_fn` callables:
    `estimate(model=net, sample=(x, y), loss=F.cross_entropy, batch=64)`; the micro-batch
    defaults to the sample's rows.
    """
    started = time.perf_counter()
    from trainfit.models.live import given_spec

    with given_spec("estimate", spec, kwargs, sample) as given:
        return _estimate(given, started)


def _estimate(spec: TrainSpec, started: float) -> Estimate:
    device = get_device(spec.device)
    if device.kind is DeviceKind.CPU:
        return estimate_cpu(spec, device, started)
    if device.kind not in (DeviceKind.CUDA, DeviceKind.MPS):
        raise SpecError(
            [
                f"device {device.name!r} is of kind '{device.kind}': only CUDA GPUs, "
                "Apple GPUs and the CPU are estimated; choose a GPU such as h100, rtx-4060 or "
                "m4-pro-24gb, or cpu"
            ]
        )
    if device.kind is DeviceKind.MPS and spec.precision is Precision.TF32:
        raise SpecError(
            [
                f"precision 'tf32' is a CUDA setting; {device.display} trains in fp32, fp16, "
                "bf16 or pure-bf16: choose one of those"
            ]
        )
    trace = trace_step(spec, target=Target.of(device))
    result, context = gpu_memory(trace, spec, device)
    live = result.live_at_peak
    breakdown = Breakdown(
        parameters=live.get(Category.PARAMETERS.value, 0),
        gradients=live.get(Category.GRADIENTS.value, 0),
        optimizer_state=live.get(Category.OPTIMIZER_STATE.value, 0),
        activations=live.get(Category.ACTIVATIONS.value, 0),
        temporaries=live.get(Category.TEMPORARIES.value, 0),
        workspaces=live.get(WORKSPACES, 0),
        allocator_overhead=result.peak_reserved_bytes - result.peak_allocated_bytes,
        runtime_context=context,
    )
    needed = result.peak_reserved_bytes + context
    notes: list[EstimateNote] = list(trace.notes)
    if device.kind is DeviceKind.MPS:
        labels = {
            "peak_allocated_bytes": FigureLabel(Provenance.TRACED, How.MPS_TRACED),
            "peak_reserved_bytes": FigureLabel(Provenance.MODELLED, How.MPS_HEAP_REPLAY),
            "runtime_context": FigureLabel(Provenance.MODELLED, How.METAL_FLOOR),
        }
        notes.append(AppleMemory(working_set_bytes=device.memory_bytes))
    else:
        if emulated_bf16(spec, device):
            notes.append(
                EmulatedBf16(
                    device=device.display,
                    compute_capability=device.compute_capability,
                    precision=spec.precision,
                )
            )
        profile = profile_of(device)
        labels = {
            "peak_allocated_bytes": FigureLabel(Provenance.TRACED, How.TRACED),
            "peak_reserved_bytes": FigureLabel(Provenance.SIMULATED, How.CACHING_REPLAY),
            "runtime_context": _context_label(profile),
            "workspaces": FigureLabel(Provenance.DEFAULT, How.LIBRARY_DEFAULT),
        }
    fits = (
        needed <= device.memory_bytes or gpu_fits(trace, spec, device, device.memory_bytes)
        if device.memory_bytes
        else None
    )
    return assemble(spec, device, trace, result, needed, breakdown, fits, labels, started, notes)


def _context_label(profile: RuntimeProfile) -> FigureLabel:
    if profile.measured:
        return FigureLabel(Provenance.MEASURED, How.MEASURED_CONSTANT)
    if profile.fitted:
        return FigureLabel(Provenance.MODELLED, How.PER_SM_RULE)
    return FigureLabel(Provenance.MODELLED, How.H100_CONSTANTS)
