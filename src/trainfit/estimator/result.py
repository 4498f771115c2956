"""What `estimate()` returns: the predicted memory of one training step and its breakdown.

`assemble` turns a traced and replayed step into an Estimate; the CUDA/Apple-GPU estimator
(`estimator.step`) and the CPU one (`estimator.cpu`) share it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from trainfit.estimator.labels import FigureLabel, How, Label, LoraLabel
from trainfit.hardware.catalog import Device, DeviceKind
from trainfit.memory.replay import Replay
from trainfit.models.heads import ModelClass
from trainfit.models.program import Description, LossNote
from trainfit.models.weights import StepDtypes
from trainfit.provenance import Provenance
from trainfit.spec import LoraSpec, Precision, TrainSpec
from trainfit.timing.missing import NoStepTime, NoTime, RateMissing
from trainfit.timing.step import StepTime, step_time
from trainfit.trace.compat import UntestedTorch
from trainfit.trace.recorder import DataCheck
from trainfit.trace.step import StepTrace
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
    model_description: Description
    loss_note: LossNote
    parameter_count: int
    trainable_parameter_count: int
    attention_kernels: dict[str, int]
    """SDPA calls of one training step by the kernel the target runs (flash, cudnn, ...)."""
    assumptions: tuple[DataCheck, ...]
    """The data-dependent values the trace answered without data."""
    labels: dict[str, Label]
    """How each figure was obtained: its provenance, and the words that say so."""
    seconds: float
    notes: tuple[EstimateNote, ...] = field(default=())
    step_time: StepTime | None = None
    """How long one optimizer step takes on the device (modelled; None where the catalog
    lacks the device's rates, said in `step_time_missing`)."""
    step_time_missing: NoStepTime | None = None
    """Why there is no step time (None when there is one)."""
    step_time_tokens: int | None = None
    """Tokens per sample of the traced step (for tokens per epoch and tokens/s)."""
    dtypes: StepDtypes | None = None
    """The dtypes of the weights, gradients and optimizer state."""
    model_class: ModelClass | None = None
    """The transformers class the model was built as, and why (None for a plain module)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EmulatedBf16:
    """A CUDA GPU without native bf16 computing the step in bf16: PyTorch emulates it, so the
    step runs in the memory estimated, but slower than fp16, which is native there."""

    device: str
    """The device's display name."""
    compute_capability: tuple[int, int]
    precision: Precision


@dataclass(frozen=True, kw_only=True, slots=True)
class AppleMemory:
    """An Apple GPU's memory: modelled, not measured, against Metal's recommended working set
    (PyTorch refuses allocations past 1.7 times it; macOS swaps before that); MPSGraph's own
    buffers are not counted."""

    working_set_bytes: int
    """The limit used: Metal's recommended working set."""


@dataclass(frozen=True, kw_only=True, slots=True)
class QloraModelled:
    """QLoRA is modelled, not measured (`trainfit.models.quantized`): each Linear but the head
    holds 0.5 byte per weight plus its block scales and is dequantised per matmul; the other
    weights stay in the load dtype; AdamW is bitsandbytes' paged 8-bit AdamW, its state on the
    device."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoHostRam:
    """The host's RAM could not be detected: no fits verdict."""


EstimateNote = UntestedTorch | EmulatedBf16 | AppleMemory | QloraModelled | NoHostRam
"""A note of an Estimate, a typed fact (words: `trainfit.report.estimate`)."""


def lora_labels(lora: LoraSpec | None) -> tuple[dict[str, Label], list[EstimateNote]]:
    """How the LoRA/QLoRA parts of a result were obtained (labels) and what to say (notes)."""
    if lora is None:
        return {}, []
    traced = LoraLabel(lora=lora)
    if not lora.qlora:
        return {"lora": traced}, []
    return (
        {"lora": traced, "qlora": FigureLabel(Provenance.MODELLED, How.QLORA)},
        [QloraModelled()],
    )


def emulated_bf16(spec: TrainSpec, device: Device) -> bool:
    """Whether `spec` computes in bf16 on a CUDA GPU without native bf16 (before Ampere: T4,
    V100). PyTorch runs it there: `torch.cuda.is_bf16_supported()` is True by emulation, so
    autocast and bf16 tensors work, without bf16 tensor cores."""
    bf16 = spec.precision in (Precision.BF16, Precision.PURE_BF16)
    return bf16 and device.kind is DeviceKind.CUDA and not device.has_bf16


def modelled_step_time(
    trace: StepTrace, spec: TrainSpec, device: Device
) -> tuple[StepTime | None, NoStepTime | None]:
    """The step time of a traced step on `device`, or None and why not."""
    if trace.costs is None:
        return None, NoStepTime(why=NoTime.NO_OP_COSTS)
    if emulated_bf16(spec, device):
        return None, NoStepTime(why=NoTime.EMULATED_BF16, device=device.display)
    try:
        return (
            step_time(trace.costs, spec, device, trace.tokens_per_sample, trace.trainable_tensors),
            None,
        )
    except RateMissing as exc:
        return None, NoStepTime(why=NoTime.CATALOG_LACKS, lack=exc.lack)


def assemble(
    spec: TrainSpec,
    device: Device,
    trace: StepTrace,
    result: Replay,
    needed: int,
    breakdown: Breakdown,
    fits: bool | None,
    labels: dict[str, Label],
    started: float,
    notes: list[EstimateNote],
) -> Estimate:
    """The Estimate of a traced and replayed step (shared by the CUDA and CPU targets)."""
    adapters, lora_notes = lora_labels(spec.lora)
    labels = {**labels, **adapters}
    notes = [*notes, *lora_notes]
    step, why = None, None
    if device.kind in (DeviceKind.CUDA, DeviceKind.MPS) and trace.costs is not None:
        step, why = modelled_step_time(trace, spec, device)
    return Estimate(
        step_time=step,
        step_time_missing=why,
        step_time_tokens=trace.tokens_per_sample,
        dtypes=trace.dtypes,
        model_class=trace.model_class,
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
