"""The low-memory ladder: its changes in order (`LADDER`), what each does to a setting, and
their memory on one GPU at the same effective batch.

One ladder, used by the plan (the settings it tries per device, cheapest change first, and
the ladder table), by the monitor's advice after an out-of-memory error and, through the
plan, by autofit. Its order (from a VQ model's low-memory notes): mixed precision, a quarter
of the micro-batch with more accumulation, gradient checkpointing, 8-bit AdamW state,
micro-batch 1.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from trainfit.errors import SpecError, TraceError
from trainfit.hardware.catalog import Device, DeviceKind
from trainfit.optim import optimizer_entry
from trainfit.plan.options import Change, MpsAutocast, Rung, SettingChange
from trainfit.plan.traces import TraceCache, needed_once, other_optimizer, traced
from trainfit.plan.worker import LadderWorker
from trainfit.progress import Part, tell
from trainfit.spec import Precision, TrainSpec

LADDER: tuple[Change, ...] = (
    Change.MIXED_PRECISION,
    Change.QUARTER_MICRO_BATCH,
    Change.CHECKPOINTING,
    Change.EIGHT_BIT_ADAMW,
    Change.MICRO_BATCH_ONE,
)
"""The ladder's changes, cheapest first."""

_BATCH_CHANGES = (Change.QUARTER_MICRO_BATCH, Change.MICRO_BATCH_ONE)


def supported_precision(device: Device) -> Precision:
    """The mixed precision of `device`: bf16 autocast where a CUDA GPU computes in bf16
    (compute capability 8.0 on), else fp16; fp16 on an Apple GPU.

    NB: from the compute capability (bf16 tensor cores arrived with Ampere, sm80); the catalog's
    list of supported precisions says the same for every CUDA row. MPS autocast takes fp16 from
    torch 2.5 and bf16 from torch 2.6 on macOS 14, but the M1 and M2 have no bf16 arithmetic
    (Metal emulates it in fp32), so fp16 is the Mac's mixed precision.
    """
    if device.kind is DeviceKind.MPS:
        return Precision.FP16
    return Precision.BF16 if device.has_bf16 else Precision.FP16


def applies(change: Change, spec: TrainSpec) -> bool:
    """Whether `spec` has not taken `change` yet and can (8-bit state replaces Adam(W)'s)."""
    effective = spec.batch * spec.grad_accum
    return {
        Change.MIXED_PRECISION: spec.precision in (Precision.FP32, Precision.TF32),
        Change.QUARTER_MICRO_BATCH: spec.batch > max(1, effective // 4),
        Change.CHECKPOINTING: not spec.checkpointing,
        Change.EIGHT_BIT_ADAMW: optimizer_entry(spec.optimizer).eight_bit is not None,
        Change.MICRO_BATCH_ONE: spec.batch != 1,
    }[change]


def micro_batch_after(change: Change, effective: int, micro: int) -> int:
    """The micro-batch after `change` (the same effective batch, more accumulation)."""
    if change is Change.QUARTER_MICRO_BATCH:
        return max(1, effective // 4)
    return 1 if change is Change.MICRO_BATCH_ONE else micro


def setting_after(change: Change, spec: TrainSpec, device: Device) -> TrainSpec:
    """`spec` with the precision, checkpointing or optimizer that `change` sets (its batch
    untouched: see `micro_batch_after`). Mixed precision is bf16 on the CPU."""
    if change is Change.MIXED_PRECISION:
        precision = Precision.BF16 if device.kind is DeviceKind.CPU else supported_precision(device)
        return dataclasses.replace(spec, precision=precision)
    if change is Change.CHECKPOINTING:
        return dataclasses.replace(spec, checkpointing=True)
    eight_bit = optimizer_entry(spec.optimizer).eight_bit
    if change is Change.EIGHT_BIT_ADAMW and eight_bit is not None:
        return dataclasses.replace(spec, optimizer=eight_bit)
    return spec


def setting_name(spec: TrainSpec) -> str:
    """The setting a rung tries, as the plan's options name it (`bf16+checkpointing+adamw`),
    for a progress display."""
    checkpointing = ("checkpointing",) if spec.checkpointing else ()
    return "+".join((spec.precision.value, *checkpointing, spec.optimizer.value))


def with_change(change: Change, spec: TrainSpec, device: Device) -> TrainSpec:
    """`spec` with `change` taken, the micro-batch and accumulation included."""
    changed = setting_after(change, spec, device)
    if change not in _BATCH_CHANGES:
        return changed
    effective = spec.batch * spec.grad_accum
    micro = micro_batch_after(change, effective, spec.batch)
    return dataclasses.replace(changed, batch=micro, grad_accum=math.ceil(effective / micro))


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderStep:
    """One rung of the ladder table: the change (None: where it starts), the setting and the
    micro-batch it runs at."""

    change: Change | None
    spec: TrainSpec
    micro_batch: int


def ladder_steps(spec: TrainSpec, effective: int, device: Device) -> list[LadderStep]:
    """The ladder from fp32 at the whole effective batch, each change on top of the ones
    before (8-bit state only for Adam(W))."""
    current = dataclasses.replace(spec, precision=Precision.FP32, checkpointing=False)
    micro = effective
    steps = [LadderStep(change=None, spec=current, micro_batch=micro)]
    for change in LADDER:
        if change is Change.EIGHT_BIT_ADAMW and not applies(change, current):
            continue
        current = setting_after(change, current, device)
        micro = micro_batch_after(change, effective, micro)
        steps.append(LadderStep(change=change, spec=current, micro_batch=micro))
    return steps


def setting_rungs(
    spec: TrainSpec, device: Device, auto_precision: bool
) -> list[tuple[TrainSpec, tuple[SettingChange, ...]]]:
    """The settings a device is planned with, cheapest change first, with the changes made:
    the ladder's setting changes (its batch changes are the micro-batch search)."""
    base = spec
    changes: list[SettingChange] = []
    rungs = []
    if auto_precision and device.kind is DeviceKind.MPS:
        # NB: fp32 first on a Mac (what small models' Mac configs run; MPS autocast is
        # young), then fp16 autocast as the first change
        base = dataclasses.replace(spec, precision=Precision.FP32)
        rungs.append((base, ()))
        base = setting_after(Change.MIXED_PRECISION, base, device)
        changes.append(MpsAutocast(precision=base.precision))
    elif auto_precision:
        base = setting_after(Change.MIXED_PRECISION, spec, device)
    rungs.append((base, tuple(changes)))
    if applies(Change.CHECKPOINTING, base):
        base = setting_after(Change.CHECKPOINTING, base, device)
        changes.append(Change.CHECKPOINTING)
        rungs.append((base, tuple(changes)))
    # NB: bitsandbytes' 8-bit optimizers are CUDA kernels; not offered on an Apple GPU
    if applies(Change.EIGHT_BIT_ADAMW, base) and device.kind is DeviceKind.CUDA:
        base = setting_after(Change.EIGHT_BIT_ADAMW, base, device)
        changes.append(Change.EIGHT_BIT_ADAMW)
        rungs.append((base, tuple(changes)))
    return rungs


def ladder_rungs(
    spec: TrainSpec,
    effective: int,
    device: Device,
    cache: TraceCache,
    worker: LadderWorker | None = None,
) -> tuple[Rung, ...]:
    """The ladder on `device`: each change's memory at the same effective batch."""
    rungs: list[Rung] = []
    before = 0
    steps = ladder_steps(spec, effective, device)
    tell(Part.DEVICE, device.name)
    for index, step in enumerate(steps):
        name = step.change.value if step.change is not None else step.spec.precision.value
        tell(Part.RUNG, name, index=index + 1, total=len(steps))
        needed = None
        if (
            worker is not None
            and not traced(step.spec, device, cache)
            and other_optimizer(step.spec, device, cache) is None
        ):
            needed = worker.needed(index)
        try:
            if needed is None:
                needed = needed_once(step.spec, step.micro_batch, device, cache)
        except SpecError:
            if not step.spec.checkpointing or spec.checkpointing:
                raise
            continue  # NB: a model with no blocks to checkpoint skips that rung
        except TraceError:
            if step.micro_batch > 1:
                raise
            continue  # NB: a model that cannot train on one sample (BatchNorm) skips that rung
        rungs.append(
            Rung(
                change=step.change,
                precision=step.spec.precision,
                micro_batch=step.micro_batch,
                grad_accum=math.ceil(effective / step.micro_batch),
                needed_bytes=needed,
                saved_bytes=before - needed if rungs else 0,
            )
        )
        before = needed
    return tuple(rungs)
