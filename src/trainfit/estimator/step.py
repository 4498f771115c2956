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
from dataclasses import asdict, dataclass, field
from typing import Any

from trainfit.errors import SpecError
from trainfit.hardware.catalog import Device, get_device
from trainfit.memory.allocator import OutOfMemory
from trainfit.memory.mps_allocator import MpsAllocator
from trainfit.memory.replay import WORKSPACES, Replay, replay
from trainfit.memory.runtime import PROFILES, context_bytes, cublas_workspace_bytes
from trainfit.models.lora import labels as peft_labels
from trainfit.spec import Precision, TrainSpec
from trainfit.timing.step import RateMissing, StepTime, step_time
from trainfit.trace.recorder import Thread
from trainfit.trace.step import Category, StepTrace, trace_step
from trainfit.trace.target import Target
from trainfit.training import Phase


@dataclass(frozen=True, kw_only=True, slots=True)
class Breakdown:
    """Device memory at the peak, by what it holds; sums to device_memory_needed."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    """Tensors the forward pass keeps for backward (inputs included)."""
    temporaries: int
    """Short-lived tensors of backward and the optimizer step live at the peak."""
    workspaces: int
    """Library buffers allocated through PyTorch at the peak: cuBLAS handles' workspaces, cuDNN
    scratch (convolution, LSTM, attention-dropout workspaces; LSTM reserve space excluded)."""
    allocator_overhead: int
    """Peak reserved minus peak allocated: rounding, fragmentation and cached free blocks."""
    runtime_context: int
    """CUDA context, loaded kernels and library handles, outside the allocator."""

    def total(self) -> int:
        return sum(asdict(self).values())


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    """The predicted memory of one training step on one device."""

    spec: TrainSpec
    device: Device
    device_memory_needed_bytes: int
    """What must be free on the device: peak reserved + runtime context."""
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    breakdown: Breakdown
    peak_phase: Phase
    peak_iteration: int
    """0: the first iteration (creates optimizer state); 1: the steady state."""
    peak_op: str
    fits: bool | None
    """Whether device_memory_needed fits the device's memory (for the CPU, the host's RAM;
    None when it cannot be detected)."""
    model_description: str
    loss_note: str
    parameter_count: int
    trainable_parameter_count: int
    attention_kernels: dict[str, int]
    """SDPA calls of one training step by the kernel the target runs (flash, cudnn, ...)."""
    assumptions: tuple[str, ...]
    labels: dict[str, str]
    """How each figure was obtained: "traced", "simulated", "measured constant", "modelled"."""
    seconds: float
    notes: tuple[str, ...] = field(default=())
    step_time: StepTime | None = None
    """How long one optimizer step takes on the device (modelled; None where the catalog
    lacks the device's rates, said in `notes`)."""
    step_time_tokens: int | None = None
    """Tokens per sample of the traced step (for tokens per epoch and tokens/s)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (bytes as integers)."""
        spec = asdict(self.spec)
        spec["precision"] = self.spec.precision.value
        spec["optimizer"] = self.spec.optimizer.value
        spec["inputs"] = [
            f"{i.name}={','.join(str(d) for d in i.dims)}:{str(i.dtype).removeprefix('torch.')}"
            for i in self.spec.inputs
        ]
        return {
            "device": self.device.name,
            "device_display": self.device.display,
            "device_memory_bytes": self.device.memory_bytes,
            "device_memory_needed_bytes": self.device_memory_needed_bytes,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "breakdown": asdict(self.breakdown),
            "peak": {
                "phase": self.peak_phase.value,
                "iteration": "first" if self.peak_iteration == 0 else "steady",
                "op": self.peak_op,
            },
            "fits": self.fits,
            "model": self.model_description,
            "loss": self.loss_note,
            "parameters": self.parameter_count,
            "trainable_parameters": self.trainable_parameter_count,
            "lora": None if self.spec.lora is None else self.spec.lora.to_dict(),
            "attention_kernels": self.attention_kernels,
            "assumptions": list(self.assumptions),
            "labels": self.labels,
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
            "time": None if self.step_time is None else self.step_time.to_dict(),
            "spec": spec,
        }


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
    goes through the MPS heap allocator; its runtime's own buffers are not modelled (0).
    """
    if device.kind == "mps":
        return replay(trace, 0, budget, sizes, allocator=MpsAllocator), 0
    profile = PROFILES[device.runtime_profile]
    reduced = spec.precision in (Precision.FP16, Precision.BF16, Precision.PURE_BF16)
    context = context_bytes(
        profile,
        uses_cublas=bool(trace.workspaces),
        reduced_precision=reduced,
        backward_cublas=any(w.thread is Thread.AUTOGRAD for w in trace.workspaces),
    )
    capacity = None if budget is None else max(0, budget - context)
    result = replay(trace, cublas_workspace_bytes(device.compute_capability), capacity, sizes)
    return result, context


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


def estimate(spec: TrainSpec | None = None, **kwargs: Any) -> Estimate:
    """Predict the device memory one training step of `spec` needs on `spec.device`.

    Pass a TrainSpec, or its fields as keyword arguments: `estimate(model="gpt2", batch=8)`.
    """
    started = time.perf_counter()
    if spec is None:
        spec = TrainSpec(**kwargs)
    elif kwargs:
        raise SpecError(["give either a TrainSpec or keyword arguments, not both"])
    device = get_device(spec.device)
    if device.kind == "cpu":
        from trainfit.estimator.cpu import estimate_cpu

        return estimate_cpu(spec, device, started)
    if device.kind not in ("cuda", "mps"):
        raise SpecError(
            [
                f"device {device.name!r} is of kind {device.kind!r}: only CUDA GPUs, Apple GPUs "
                "and the CPU are estimated; choose a GPU such as h100, rtx-4060 or m4-pro-24gb, "
                "or cpu"
            ]
        )
    if device.kind == "mps" and spec.precision is Precision.TF32:
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
    notes = list(trace.notes)
    if device.kind == "mps":
        labels = {
            "peak_allocated_bytes": "traced (MPS rules: autocast lists, math attention)",
            "peak_reserved_bytes": "modelled (MPS heap allocator replay, not checked on a Mac)",
            "runtime_context": "not modelled (Metal and MPSGraph buffers)",
        }
        notes.append(
            f"Apple GPU: modelled, not measured; the limit used is Metal's recommended working "
            f"set ({device.memory_bytes / 2**30:.1f} GiB); PyTorch refuses allocations past 1.7 "
            "times it, and macOS swaps before that; MPSGraph's own buffers are not counted"
        )
    else:
        profile = PROFILES[device.runtime_profile]
        labels = {
            "peak_allocated_bytes": "traced",
            "peak_reserved_bytes": "simulated (caching allocator replay)",
            "runtime_context": (
                "measured constant" if profile.measured else "modelled (H100 constants)"
            ),
            "workspaces": "PyTorch default size",
        }
    fits = (
        needed <= device.memory_bytes or gpu_fits(trace, spec, device, device.memory_bytes)
        if device.memory_bytes
        else None
    )
    return assemble(spec, device, trace, result, needed, breakdown, fits, labels, started, notes)


def modelled_step_time(
    trace: StepTrace, spec: TrainSpec, device: Device
) -> tuple[StepTime | None, str]:
    """The step time of a traced step on `device`, or None and why not."""
    if trace.costs is None:
        return None, "step time not modelled: the traced step's op costs are missing"
    try:
        return (
            step_time(trace.costs, spec, device, trace.tokens_per_sample, trace.trainable_tensors),
            "",
        )
    except RateMissing as exc:
        return None, f"step time not modelled: {exc} (add it in a user catalog file)"


def assemble(
    spec: TrainSpec,
    device: Device,
    trace: StepTrace,
    result: Replay,
    needed: int,
    breakdown: Breakdown,
    fits: bool | None,
    labels: dict[str, str],
    started: float,
    notes: list[str],
) -> Estimate:
    """The Estimate of a traced and replayed step (shared by the CUDA and CPU targets)."""
    lora_labels, lora_notes = peft_labels(spec.lora)
    labels = {**labels, **lora_labels}
    notes = [*notes, *lora_notes]
    step = None
    if device.kind in ("cuda", "mps") and trace.costs is not None:
        step, why = modelled_step_time(trace, spec, device)
        if why:
            notes.append(why)
    return Estimate(
        step_time=step,
        step_time_tokens=trace.tokens_per_sample,
        spec=spec,
        device=device,
        device_memory_needed_bytes=needed,
        peak_allocated_bytes=result.peak_allocated_bytes,
        peak_reserved_bytes=result.peak_reserved_bytes,
        breakdown=breakdown,
        peak_phase=result.peak_phase,
        peak_iteration=result.peak_iteration,
        peak_op=result.peak_op,
        fits=fits,
        model_description=trace.description,
        loss_note=trace.loss_note,
        parameter_count=trace.parameter_count,
        trainable_parameter_count=trace.trainable_count,
        attention_kernels={k.value: v for k, v in trace.attention.items()},
        assumptions=tuple(trace.assumptions),
        labels=labels,
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
    )
