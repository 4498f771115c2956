"""Out of memory: where in the step it happened, and the next rung of the low-memory ladder.

The ladder is the planner's (`trainfit.plan.ladder.LADDER`), in its order: mixed
precision, a quarter of the micro-batch with more accumulation, gradient checkpointing, 8-bit
AdamW state, micro-batch 1. With a `TrainSpec` the next rung is the first change the spec has
not taken that trainfit's estimator predicts to save memory, with the figures; without one it is
named from what the monitor saw (autocast on, checkpointing on, the micro-batch, the optimizer),
in words only.

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
from trainfit.hardware.units import gib
from trainfit.models.program import hf_checkpointing
from trainfit.monitor.phase import StepPhase
from trainfit.optim import optimizer_entries, optimizer_entry
from trainfit.spec import OptimizerKind, TrainSpec

_REQUESTED = re.compile(r"[Tt]ried to allocate ([\d.]+) ?(bytes|B|KiB|MiB|GiB|TiB)")
_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def requested_bytes(exc: BaseException) -> int | None:
    """The allocation that failed, from the error's text ("Tried to allocate 2.00 GiB")."""
    match = _REQUESTED.search(str(exc))
    return None if match is None else int(float(match[1]) * _UNITS[match[2]])


@dataclass(frozen=True, kw_only=True, slots=True)
class NextRung:
    """The next change of the low-memory ladder, with figures where a spec gave them."""

    change: str
    """The change in words ("bf16 mixed precision")."""
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
    note: str = ""
    """Why there are no figures, or what else to know."""
    then: tuple[str, ...] = ()
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

SpecRung = Callable[[TrainSpec], "tuple[str, TrainSpec] | None"]
WordsRung = Callable[[Observed], "str | None"]
_RUNGS: list[tuple[str, SpecRung, WordsRung]] = []


def _rung(name: str, words: WordsRung) -> Callable[[SpecRung], SpecRung]:
    def register(fn: SpecRung) -> SpecRung:
        _RUNGS.append((name, fn, words))
        return fn

    return register


def _changed(name: str, spec: TrainSpec) -> TrainSpec | None:
    """`spec` with the plan's ladder change `name` (`trainfit.plan.ladder`), or None when it
    has taken it already or cannot."""
    # NB: imported here: the plan pulls in the tracer and estimator, the monitor stays light
    from trainfit.hardware.catalog import get_device
    from trainfit.plan.ladder import applies, with_change
    from trainfit.plan.options import Change

    change = Change[name]
    if not applies(change, spec):
        return None
    return with_change(change, spec, get_device(spec.device))


def _effective(spec: TrainSpec) -> int:
    return spec.batch * spec.grad_accum


def _mixed_words(seen: Observed) -> str | None:
    if seen.autocast or seen.low_precision_parameters:
        return None
    return (
        "mixed precision: run the forward and the loss under torch.autocast with bfloat16 "
        "(float16 with a GradScaler on GPUs older than Ampere)"
    )


@_rung("mixed precision", _mixed_words)
def _mixed(spec: TrainSpec) -> tuple[str, TrainSpec] | None:
    changed = _changed("MIXED_PRECISION", spec)
    return None if changed is None else (f"{changed.precision.value} mixed precision", changed)


def _quarter_words(seen: Observed) -> str | None:
    if seen.micro_batch is None:
        return "a smaller micro-batch with more gradient accumulation (same effective batch)"
    accumulation = seen.accumulation or 1
    effective = seen.micro_batch * accumulation
    quarter = max(1, effective // 4)
    if seen.micro_batch <= quarter:
        return None
    return (
        f"micro-batch {quarter} with {math.ceil(effective / quarter)} accumulation steps "
        f"instead of {seen.micro_batch} with {accumulation} (same effective batch)"
    )


@_rung("quarter micro-batch", _quarter_words)
def _quarter(spec: TrainSpec) -> tuple[str, TrainSpec] | None:
    changed = _changed("QUARTER_MICRO_BATCH", spec)
    if changed is None:
        return None
    return (
        f"micro-batch {changed.batch} with {changed.grad_accum} accumulation steps (effective "
        f"batch {_effective(spec)})",
        changed,
    )


def _checkpointing_words(seen: Observed) -> str | None:
    if seen.checkpointing:
        return None
    return (
        "gradient checkpointing (model.gradient_checkpointing_enable() on a Hugging Face "
        "model, torch.utils.checkpoint around your blocks)"
    )


@_rung("gradient checkpointing", _checkpointing_words)
def _checkpointing(spec: TrainSpec) -> tuple[str, TrainSpec] | None:
    changed = _changed("CHECKPOINTING", spec)
    return None if changed is None else ("gradient checkpointing", changed)


def _eight_bit_words(seen: Observed) -> str | None:
    if seen.optimizer is None:
        eight_bit = optimizer_entry(OptimizerKind.ADAMW_8BIT).class_path
        return f"8-bit AdamW state ({eight_bit}), if you train with Adam(W)"
    for entry in optimizer_entries():
        if entry.eight_bit is not None and entry.class_name == seen.optimizer:
            eight_bit = optimizer_entry(entry.eight_bit).class_path
            return f"8-bit AdamW state ({eight_bit} instead of {seen.optimizer})"
    return None


@_rung("8-bit AdamW", _eight_bit_words)
def _eight_bit(spec: TrainSpec) -> tuple[str, TrainSpec] | None:
    changed = _changed("EIGHT_BIT_ADAMW", spec)
    return None if changed is None else ("8-bit AdamW state", changed)


def _one_words(seen: Observed) -> str | None:
    if seen.micro_batch == 1:
        return None
    return "micro-batch 1 with accumulation (same effective batch)"


@_rung("micro-batch 1", _one_words)
def _one(spec: TrainSpec) -> tuple[str, TrainSpec] | None:
    changed = _changed("MICRO_BATCH_ONE", spec)
    if changed is None:
        return None
    return f"micro-batch 1 with {changed.grad_accum} accumulation steps", changed


RUNG_NAMES = tuple(name for name, _, _ in _RUNGS)
"""The ladder's rungs in order."""

_LAST_RESORT = (
    "every rung of the ladder is taken: shard the model over GPUs (FSDP, DeepSpeed ZeRO), "
    "offload optimizer state to the CPU, freeze layers or use LoRA, or a larger device"
)


def next_rung_for_spec(spec: TrainSpec) -> NextRung:
    """The first rung `spec` has not taken that the estimator predicts to save memory.

    NB: a rung predicted to save nothing (mixed precision of a tiny model, whose bf16 weight
    copies outweigh its activations) is passed over for the next one.
    """
    from trainfit.estimator.step import estimate

    try:
        current = estimate(spec)
    except TrainfitError as exc:
        words = next_rung_from_spec_words(spec)
        return NextRung(change=words, note=f"no figures: estimating the spec failed ({exc})")
    skipped: list[str] = []
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
            skipped.append(f"{name} ({exc})")
            continue
        rung = NextRung(
            change=change,
            spec=rung_spec,
            needed_bytes=result.device_memory_needed_bytes,
            current_needed_bytes=current.device_memory_needed_bytes,
            fits=result.fits,
            device=result.device.display,
            note=f"passed over: {', '.join(skipped)}" if skipped else "",
        )
        if rung.saved_bytes is not None and rung.saved_bytes > 0:
            return rung if rung.fits is not False else _until_fit(rung, name)
        first = first or rung
        skipped.append(f"{change} (predicted to save nothing)")
    if first is not None:
        return dataclasses.replace(first, note=f"no rung saves memory; {_LAST_RESORT}")
    return NextRung(change=_LAST_RESORT, device=current.device.display)


def _until_fit(rung: NextRung, name: str) -> NextRung:
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
    return dataclasses.replace(rung, note=f"no rung of the ladder fits: {_LAST_RESORT}")


def next_rung_from_spec_words(spec: TrainSpec) -> str:
    """The next rung of `spec` in words, without estimating."""
    for _, apply, _ in _RUNGS:
        changed = apply(spec)
        if changed is not None:
            return changed[0]
    return _LAST_RESORT


def next_rung_observed(seen: Observed) -> NextRung:
    """The next rung named from what the monitor saw; no figures."""
    for _, _, words in _RUNGS:
        change = words(seen)
        if change is not None:
            return NextRung(change=change, note="pass spec= to the monitor for predicted figures")
    return NextRung(change=_LAST_RESORT)


# -- the report -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class OomReport:
    """An out-of-memory error seen by the monitor: where, how full, and what to change."""

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
    text: str
    """One paragraph for people."""


def _where(phase: StepPhase, module: str | None, module_type: str | None) -> str:
    what = {
        StepPhase.FORWARD: "in the forward pass",
        StepPhase.LOSS: "after the model's forward (the loss, or the start of its backward)",
        StepPhase.BACKWARD: "in the backward pass",
        StepPhase.OPTIMIZER: "in the optimizer step",
        StepPhase.DATA: "outside forward, backward and the optimizer step (data, or an "
        "optimizer the monitor was not given)",
    }[phase]
    if module is None:
        return what
    kind = f" ({module_type})" if module_type and module_type != module else ""
    prep = "at" if phase is StepPhase.BACKWARD else "in"
    return f"{what}, {prep} module {module}{kind}"


def _and(items: tuple[str, ...]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _rung_text(rung: NextRung) -> str:
    if rung.needed_bytes is None or rung.current_needed_bytes is None:
        text = f"Next rung of the low-memory ladder: {rung.change}"
        return text + (f" ({rung.note})." if rung.note else ".")
    saved = rung.saved_bytes or 0
    delta = f"saves {gib(saved)}" if saved >= 0 else f"costs {gib(-saved)} more"
    verdict = {True: "fits", False: "does not fit", None: "may or may not fit"}[rung.fits]
    text = (
        f"Next rung of the low-memory ladder: {rung.change}, predicted {gib(rung.needed_bytes)} "
        f"instead of {gib(rung.current_needed_bytes)} ({delta}), which {verdict} the "
        f"{rung.device}"
    )
    if rung.then and rung.then_needed_bytes is not None:
        text += (
            f"; with {_and(rung.then)} as well: predicted {gib(rung.then_needed_bytes)}, which fits"
        )
    return text + (f"; {rung.note}." if rung.note else ".")


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
    """The report with its paragraph."""
    requested = requested_bytes(exc)
    parts = [f"Out of memory at step {step}, {_where(phase, module, module_type)}"]
    figures = []
    if requested is not None:
        figures.append(f"asking for {gib(requested)}")
    if allocated_bytes is not None:
        figures.append(f"{gib(allocated_bytes)} allocated")
    if reserved_bytes is not None:
        figures.append(f"{gib(reserved_bytes)} reserved")
    if peak_allocated_bytes is not None:
        figures.append(f"peak {gib(peak_allocated_bytes)} this step")
    if figures:
        parts.append(": " + ", ".join(figures))
        if total_bytes is not None:
            parts.append(f" of {gib(total_bytes)}")
    text = "".join(parts) + ". " + _rung_text(next_rung)
    return OomReport(
        step=step,
        phase=phase,
        module=module,
        module_type=module_type,
        allocated_bytes=allocated_bytes,
        reserved_bytes=reserved_bytes,
        peak_allocated_bytes=peak_allocated_bytes,
        total_bytes=total_bytes,
        requested_bytes=requested,
        next_rung=next_rung,
        error=(str(exc).strip().splitlines() or [type(exc).__name__])[0],
        text=text,
    )
