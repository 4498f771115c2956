"""Out of memory: where in the step it happened, and the next rung of the low-memory ladder.

The ladder is the planner's (`trainfit.plan.ladder.LADDER`), in its order: mixed
precision, a quarter of the micro-batch with more accumulation, gradient checkpointing, 8-bit
AdamW state, micro-batch 1. With a `TrainSpec` the next rung is the first change the spec has
not taken that trainfit's estimator predicts to save memory, with the figures; without one it is
named from what the monitor saw (autocast on, checkpointing on, the micro-batch, the optimizer),
without figures. Words: `trainfit.monitor.oom_words`.

Known limitations: the spec is trusted (a spec that says fp32 for a run under autocast gives
the fp32 rung); without a spec, a rung the run took in a way the hooks cannot see (an
8-bit optimizer under another class name) may be named again.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from trainfit.errors import TrainfitError
from trainfit.models.program import hf_checkpointing
from trainfit.monitor.phase import StepPhase
from trainfit.optim import optimizer_entries, optimizer_entry
from trainfit.plan.options import Change
from trainfit.spec import OptimizerKind, Precision, TrainSpec

_REQUESTED = re.compile(r"[Tt]ried to allocate ([\d.]+) ?(bytes|B|KiB|MiB|GiB|TiB)")
_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def requested_bytes(exc: BaseException) -> int | None:
    """The allocation that failed, from the error's text ("Tried to allocate 2.00 GiB")."""
    match = _REQUESTED.search(str(exc))
    return None if match is None else int(float(match[1]) * _UNITS[match[2]])


@dataclass(frozen=True, kw_only=True, slots=True)
class RungChange:
    """A rung of the ladder as a change to a spec, with the figures its words name."""

    change: Change
    precision: Precision | None = None
    """The mixed precision taken (`Change.MIXED_PRECISION`)."""
    micro_batch: int | None = None
    """The micro-batch taken (`Change.QUARTER_MICRO_BATCH`, `Change.MICRO_BATCH_ONE`)."""
    grad_accum: int | None = None
    """Its accumulation steps."""
    effective_batch: int | None = None
    """The spec's effective batch, kept (`Change.QUARTER_MICRO_BATCH`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RungAdvice:
    """A rung named from what the monitor saw (no spec), with what its words name."""

    change: Change
    micro_batch: int | None = None
    """The micro-batch advised (`Change.QUARTER_MICRO_BATCH`; None: no micro-batch seen)."""
    grad_accum: int | None = None
    """Its accumulation steps."""
    seen_micro_batch: int | None = None
    """The micro-batch seen, which it replaces."""
    seen_accumulation: int | None = None
    """The accumulation seen (1 before the first optimizer step ended)."""
    optimizer_path: str = ""
    """The 8-bit optimizer's class path (`Change.EIGHT_BIT_ADAMW`)."""
    instead_of: str | None = None
    """The optimizer class seen, which it replaces (None: the monitor was not given it)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AllTaken:
    """Every rung of the ladder is taken: what is left is sharding, offload, LoRA or a larger
    device."""


LadderMove = RungChange | RungAdvice | AllTaken
"""The next move down the ladder, or that there is none."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RungFailed:
    """Estimating the spec with `change` raised (`error`: its error's text)."""

    change: Change
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SavesNothing:
    """The estimator predicts `change` to save no memory."""

    change: RungChange


@dataclass(frozen=True, kw_only=True, slots=True)
class PassedOver:
    """Rungs passed over before the one named."""

    skipped: tuple[RungFailed | SavesNothing, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class EstimateFailed:
    """Estimating the user's spec raised (`error`: its error's text): no figures."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NoRungSaves:
    """No rung is predicted to save memory (the first one is named)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoRungFits:
    """The rung named does not fit, nor do the later ones taken with it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoSpec:
    """Named from what the monitor saw: figures need `spec=`."""


RungNote = PassedOver | EstimateFailed | NoRungSaves | NoRungFits | NoSpec
"""Why a next rung has no figures, or what else to know."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NextRung:
    """The next change of the low-memory ladder, with figures where a spec gave them (words:
    `trainfit.monitor.oom_words`)."""

    change: LadderMove
    spec: TrainSpec | None = None
    """The user's spec with the change (None without a spec)."""
    needed_bytes: int | None = None
    """Predicted device memory of the changed spec."""
    current_needed_bytes: int | None = None
    """Predicted device memory of the user's spec."""
    fits: bool | None = None
    """Whether the changed spec is predicted to fit `device`."""
    device: str = ""
    """The target device's display name."""
    note: RungNote | None = None
    """Why there are no figures, or what else to know."""
    then: tuple[RungChange, ...] = ()
    """When the change does not fit: the further rungs, taken together with it, after which
    the spec is predicted to fit (empty when none do or no figures)."""
    then_needed_bytes: int | None = None
    """Predicted device memory with `change` and every change of `then`."""

    @property
    def saved_bytes(self) -> int | None:
        if self.needed_bytes is None or self.current_needed_bytes is None:
            return None
        return self.current_needed_bytes - self.needed_bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class Observed:
    """What the monitor saw of the run, for naming the next rung without a spec."""

    autocast: bool = False
    low_precision_parameters: bool = False
    checkpointing: bool = False
    micro_batch: int | None = None
    accumulation: int | None = None
    """Training forwards per optimizer step (None before the first step ended)."""
    optimizer: str | None = None
    """The optimizer's class name, if the monitor was given it."""


def observe(
    model: nn.Module | None,
    optimizer: torch.optim.Optimizer | None,
    autocast: bool,
    recompute: bool,
    micro_batch: int | None,
    accumulation: int | None,
) -> Observed:
    """Observed from the model, the optimizer and the phase tracker's findings."""
    low = checkpointing = False
    if model is not None:
        first = next(model.parameters(), None)
        low = first is not None and first.dtype in (torch.float16, torch.bfloat16)
        checkpointing = any(hf_checkpointing(m) for m in model.modules())
    return Observed(
        autocast=autocast,
        low_precision_parameters=low,
        checkpointing=checkpointing or recompute,
        micro_batch=micro_batch,
        accumulation=accumulation,
        optimizer=None if optimizer is None else type(optimizer).__name__,
    )


# -- the ladder: one small function per rung, in the planner's order ------------------------

SpecRung = Callable[[TrainSpec], "tuple[RungChange, TrainSpec] | None"]
SeenRung = Callable[[Observed], "RungAdvice | None"]
_RUNGS: list[tuple[Change, SpecRung, SeenRung]] = []


def _rung(change: Change, seen: SeenRung) -> Callable[[SpecRung], SpecRung]:
    def register(fn: SpecRung) -> SpecRung:
        _RUNGS.append((change, fn, seen))
        return fn

    return register


def _changed(change: Change, spec: TrainSpec) -> TrainSpec | None:
    """`spec` with the plan's ladder change (`trainfit.plan.ladder`), or None when it has taken
    it already or cannot."""
    # NB: imported here: the ladder pulls in the tracer, the monitor stays light
    from trainfit.hardware.catalog import get_device
    from trainfit.plan.ladder import applies, with_change

    if not applies(change, spec):
        return None
    return with_change(change, spec, get_device(spec.device))


def _effective(spec: TrainSpec) -> int:
    return spec.batch * spec.grad_accum


def _mixed_seen(seen: Observed) -> RungAdvice | None:
    if seen.autocast or seen.low_precision_parameters:
        return None
    return RungAdvice(change=Change.MIXED_PRECISION)


@_rung(Change.MIXED_PRECISION, _mixed_seen)
def _mixed(spec: TrainSpec) -> tuple[RungChange, TrainSpec] | None:
    changed = _changed(Change.MIXED_PRECISION, spec)
    if changed is None:
        return None
    return RungChange(change=Change.MIXED_PRECISION, precision=changed.precision), changed


def _quarter_seen(seen: Observed) -> RungAdvice | None:
    if seen.micro_batch is None:
        return RungAdvice(change=Change.QUARTER_MICRO_BATCH)
    accumulation = seen.accumulation or 1
    effective = seen.micro_batch * accumulation
    quarter = max(1, effective // 4)
    if seen.micro_batch <= quarter:
        return None
    return RungAdvice(
        change=Change.QUARTER_MICRO_BATCH,
        micro_batch=quarter,
        grad_accum=math.ceil(effective / quarter),
        seen_micro_batch=seen.micro_batch,
        seen_accumulation=accumulation,
    )


@_rung(Change.QUARTER_MICRO_BATCH, _quarter_seen)
def _quarter(spec: TrainSpec) -> tuple[RungChange, TrainSpec] | None:
    changed = _changed(Change.QUARTER_MICRO_BATCH, spec)
    if changed is None:
        return None
    change = RungChange(
        change=Change.QUARTER_MICRO_BATCH,
        micro_batch=changed.batch,
        grad_accum=changed.grad_accum,
        effective_batch=_effective(spec),
    )
    return change, changed


def _checkpointing_seen(seen: Observed) -> RungAdvice | None:
    return None if seen.checkpointing else RungAdvice(change=Change.CHECKPOINTING)


@_rung(Change.CHECKPOINTING, _checkpointing_seen)
def _checkpointing(spec: TrainSpec) -> tuple[RungChange, TrainSpec] | None:
    changed = _changed(Change.CHECKPOINTING, spec)
    return None if changed is None else (RungChange(change=Change.CHECKPOINTING), changed)


def _eight_bit_seen(seen: Observed) -> RungAdvice | None:
    if seen.optimizer is None:
        path = optimizer_entry(OptimizerKind.ADAMW_8BIT).class_path
        return RungAdvice(change=Change.EIGHT_BIT_ADAMW, optimizer_path=path)
    for entry in optimizer_entries():
        if entry.eight_bit is not None and entry.class_name == seen.optimizer:
            path = optimizer_entry(entry.eight_bit).class_path
            return RungAdvice(
                change=Change.EIGHT_BIT_ADAMW, optimizer_path=path, instead_of=seen.optimizer
            )
    return None


@_rung(Change.EIGHT_BIT_ADAMW, _eight_bit_seen)
def _eight_bit(spec: TrainSpec) -> tuple[RungChange, TrainSpec] | None:
    changed = _changed(Change.EIGHT_BIT_ADAMW, spec)
    return None if changed is None else (RungChange(change=Change.EIGHT_BIT_ADAMW), changed)


def _one_seen(seen: Observed) -> RungAdvice | None:
    return None if seen.micro_batch == 1 else RungAdvice(change=Change.MICRO_BATCH_ONE)


@_rung(Change.MICRO_BATCH_ONE, _one_seen)
def _one(spec: TrainSpec) -> tuple[RungChange, TrainSpec] | None:
    changed = _changed(Change.MICRO_BATCH_ONE, spec)
    if changed is None:
        return None
    change = RungChange(change=Change.MICRO_BATCH_ONE, micro_batch=1, grad_accum=changed.grad_accum)
    return change, changed


RUNG_NAMES = tuple(change.value for change, _, _ in _RUNGS)
"""The ladder's rungs in order."""


def next_rung_for_spec(spec: TrainSpec) -> NextRung:
    """The first rung `spec` has not taken that the estimator predicts to save memory.

    NB: a rung predicted to save nothing (mixed precision of a tiny model, whose bf16 weight
    copies outweigh its activations) is passed over for the next one.
    """
    from trainfit.estimator.step import estimate

    try:
        current = estimate(spec)
    except TrainfitError as exc:
        return NextRung(change=next_move(spec), note=EstimateFailed(error=str(exc)))
    skipped: list[RungFailed | SavesNothing] = []
    first: NextRung | None = None
    for name, apply, _ in _RUNGS:
        changed = apply(spec)
        if changed is None:
            continue
        change, rung_spec = changed
        # NB: each rung is the user's spec with that one change
        try:
            result = estimate(rung_spec)
        except TrainfitError as exc:
            skipped.append(RungFailed(change=name, error=str(exc)))
            continue
        rung = NextRung(
            change=change,
            spec=rung_spec,
            needed_bytes=result.device_memory_needed_bytes,
            current_needed_bytes=current.device_memory_needed_bytes,
            fits=result.fits,
            device=result.device.display,
            note=PassedOver(skipped=tuple(skipped)) if skipped else None,
        )
        if rung.saved_bytes is not None and rung.saved_bytes > 0:
            return rung if rung.fits is not False else _until_fit(rung, name)
        first = first or rung
        skipped.append(SavesNothing(change=change))
    if first is not None:
        return dataclasses.replace(first, note=NoRungSaves())
    return NextRung(change=AllTaken(), device=current.device.display)


def _until_fit(rung: NextRung, name: Change) -> NextRung:
    """`rung` with the further rungs, taken together, after which the spec fits."""
    from trainfit.estimator.step import estimate

    assert rung.spec is not None
    spec, then = rung.spec, []
    later = _RUNGS[[n for n, _, _ in _RUNGS].index(name) + 1 :]
    for _, apply, _ in later:
        changed = apply(spec)
        if changed is None:
            continue
        change, candidate = changed
        try:
            result = estimate(candidate)
        except TrainfitError:
            continue  # NB: a rung the model cannot take (no blocks to checkpoint)
        spec = candidate
        then.append(change)
        if result.fits:
            return dataclasses.replace(
                rung, then=tuple(then), then_needed_bytes=result.device_memory_needed_bytes
            )
    return dataclasses.replace(rung, note=NoRungFits())


def next_move(spec: TrainSpec) -> RungChange | AllTaken:
    """The next rung of `spec`, without estimating."""
    for _, apply, _ in _RUNGS:
        changed = apply(spec)
        if changed is not None:
            return changed[0]
    return AllTaken()


def next_rung_observed(seen: Observed) -> NextRung:
    """The next rung named from what the monitor saw; no figures."""
    for _, _, advise in _RUNGS:
        change = advise(seen)
        if change is not None:
            return NextRung(change=change, note=NoSpec())
    return NextRung(change=AllTaken())


# -- the report -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class OomReport:
    """An out-of-memory error seen by the monitor: where, how full, and what to change (its
    paragraph: `trainfit.monitor.oom_words.oom_text`)."""

    step: int
    """The optimizer step that failed (1 for the first)."""
    phase: StepPhase
    module: str | None
    """Qualified name of the module running (forward) or whose gradient came last (backward)."""
    module_type: str | None
    allocated_bytes: int | None
    reserved_bytes: int | None
    peak_allocated_bytes: int | None
    """Highest allocated since the last recorded step."""
    total_bytes: int | None
    requested_bytes: int | None
    """The allocation that failed, where the error says."""
    next_rung: NextRung
    error: str
    """The first line of the error."""


def build_report(
    *,
    step: int,
    phase: StepPhase,
    module: str | None,
    module_type: str | None,
    allocated_bytes: int | None,
    reserved_bytes: int | None,
    peak_allocated_bytes: int | None,
    total_bytes: int | None,
    exc: BaseException,
    next_rung: NextRung,
) -> OomReport:
    """The report of `exc` (its paragraph: `trainfit.monitor.oom_words.oom_text`)."""
    return OomReport(
        step=step,
        phase=phase,
        module=module,
        module_type=module_type,
        allocated_bytes=allocated_bytes,
        reserved_bytes=reserved_bytes,
        peak_allocated_bytes=peak_allocated_bytes,
        total_bytes=total_bytes,
        requested_bytes=requested_bytes(exc),
        next_rung=next_rung,
        error=(str(exc).strip().splitlines() or [type(exc).__name__])[0],
    )
