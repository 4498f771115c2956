"""trainfit's figures for a claim beyond the plan's own fields: at the document's setting (a
new trace of that setting), on a GPU count, and the device-level figures (power, electricity,
purchase price, cost of ownership, cloud rate) and model-level ones (trainable share,
weights, memory components).

A figure is `Found`: the value, or why there is none (`Missing`, typed; the report words it).

Known limitations: a setting's hours on several GPUs add DDP's all-reduce as the plan's runs
do; the figure of a setting is computed for every stage of a staged plan with the stage's own
frozen parameters, and the stages' hours summed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from trainfit.errors import TrainfitError
from trainfit.estimator.scaling import BatchScaling
from trainfit.hardware.catalog import Device, get_device, instances
from trainfit.hardware.units import GIB
from trainfit.plan.options import DevicePlan, GpuShort, Plan
from trainfit.plan.times import over_gpus, step_times
from trainfit.plan.traces import TraceCache, scaling_for
from trainfit.plan.words import time_text
from trainfit.report.document.memory import breakdown
from trainfit.report.document.model import (
    Claim,
    ClaimSetting,
    DeviceMemory,
    Missing,
    ModelSection,
    NoFigure,
    StageSection,
)
from trainfit.spec import Precision
from trainfit.timing.run import RunSpec, Stage, run_time
from trainfit.timing.step import StepTime


@dataclass(frozen=True, kw_only=True, slots=True)
class Found:
    """trainfit's figure for a claim, or why there is none."""

    value: float | None
    missing: Missing | None = None


def nothing(why: NoFigure, device: str = "", detail: str = "") -> Found:
    return Found(value=None, missing=Missing(why=why, device=device, detail=detail))


def does_not_fit(d: DevicePlan) -> Found:
    """A device with no setting: what one sample (or the states) needs against the budget."""
    note = d.note
    if isinstance(note, GpuShort):
        needed = note.one_sample_bytes if note.one_sample_bytes is not None else note.states_bytes
        return Found(
            value=None,
            missing=Missing(
                why=NoFigure.DOES_NOT_FIT,
                device=d.device,
                needed_bytes=needed,
                usable_bytes=int(note.usable_bytes),
            ),
        )
    return nothing(NoFigure.DOES_NOT_FIT, d.device)


@dataclass(frozen=True, kw_only=True, slots=True)
class AtSetting:
    """One stage's figures at a document's setting on one device."""

    needed_bytes: int
    usable_bytes: int | None
    step: StepTime | None
    no_step: Missing | None
    hours: float | None


def at_setting(
    plan: Plan,
    d: DevicePlan,
    memory: DeviceMemory,
    setting: ClaimSetting,
    gpus: int,
    cache: TraceCache,
) -> AtSetting:
    """The memory, step and run hours of `setting` on `gpus` of `d`'s device (a new trace of
    the setting; `cache` shares it between claims)."""
    device = get_device(d.device)
    scaling = _scaling_at(plan, d, setting, cache)
    spec, precision = scaling.spec, scaling.spec.precision
    micro, accum = setting.micro_batch, setting.grad_accum
    times = step_times(spec, device, scaling, micro, accum, micro * accum, ())
    step = times.get("step_time")
    no_step = None
    if step is None:
        gap = dataclasses.replace(d, step_time=None, no_time=times.get("no_time"))
        no_step = Missing(why=NoFigure.NO_STEP_TIME, device=d.device, detail=time_text(gap))
    hours = None
    if step is not None and plan.run is not None and plan.run.sized:
        hours = _hours(plan, device, step, micro * accum, gpus, precision)
    return AtSetting(
        needed_bytes=scaling.needed_bytes(micro),
        usable_bytes=memory.usable_bytes,
        step=None if step is None else over_gpus(step, gpus),
        no_step=no_step,
        hours=hours,
    )


def _scaling_at(
    plan: Plan, d: DevicePlan, setting: ClaimSetting, cache: TraceCache
) -> BatchScaling:
    """The plan's spec at `setting` on `d`'s device (precision: the setting's, else the
    device's chosen one; the chosen optimizer), traced once per `cache`."""
    chosen = d.setting
    precision = (
        Precision(setting.precision)
        if setting.precision is not None
        else (chosen.precision if chosen is not None else plan.spec.precision)
    )
    spec = dataclasses.replace(
        plan.spec,
        precision=precision,
        checkpointing=setting.checkpointing,
        optimizer=chosen.optimizer if chosen is not None else plan.spec.optimizer,
    )
    return scaling_for(spec, get_device(d.device), cache)


def components_at_setting(
    claim: Claim,
    entries: list[tuple[StageSection, DevicePlan, DeviceMemory]],
    caches: dict[int, TraceCache],
) -> Found:
    """The breakdown's components summed at the claim's own setting (the largest stage)."""
    setting = claim.setting
    assert setting is not None
    if not claim.component:
        raise TrainfitError("component_gib needs `component`: the parts to sum")
    found = []
    for stage, d, _ in entries:
        cache = caches.setdefault(id(stage.plan), TraceCache())
        parts = dict(breakdown(_scaling_at(stage.plan, d, setting, cache), setting.micro_batch))
        unknown = [c for c in claim.component if c not in parts]
        if unknown:
            raise TrainfitError(f"component {unknown[0]!r} is not one of {', '.join(parts)}")
        found.append(Found(value=sum(parts[c] for c in claim.component) / GIB))
    return combined(found, COMBINE["component_gib"])


def checkpointing_saves(
    plan: Plan, d: DevicePlan, setting: ClaimSetting, cache: TraceCache
) -> Found:
    """The percentage of the activations kept for backward that checkpointing drops, at
    `setting` (its checkpointing ignored) on `d`'s device."""
    device = get_device(d.device)
    kept = []
    for on in (False, True):
        precision = Precision(setting.precision) if setting.precision else plan.spec.precision
        spec = dataclasses.replace(plan.spec, precision=precision, checkpointing=on)
        parts = dict(breakdown(scaling_for(spec, device, cache), setting.micro_batch))
        kept.append(parts["activations"])
    if not kept[0]:
        return nothing(NoFigure.NO_BREAKDOWN, d.device)
    return Found(value=100.0 * (kept[0] - kept[1]) / kept[0])


def _hours(
    plan: Plan, device: Device, step: StepTime, per_gpu: int, gpus: int, precision: Precision
) -> float:
    """The run's hours with `step` as each GPU's step over `per_gpu` samples."""
    run = plan.run
    assert run is not None
    grad_bytes = plan.trainable_parameters * precision.param_dtype.itemsize
    stage = Stage(name="train", epochs=run.epochs, step=step)
    return run_time(
        [stage],
        per_gpu * gpus,
        dataclasses.replace(run, gpus=gpus),
        device,
        grad_bytes,
        plan.tokens_per_sample,
    ).hours


def hours_on_gpus(plan: Plan, d: DevicePlan, gpus: int) -> Found:
    """The run's hours data parallel over `gpus` of the device, at the plan's setting."""
    if d.setting is None:
        return does_not_fit(d)
    step = d.step_time if gpus == 1 else dict(d.step_times).get(gpus)
    if step is None:
        detail = time_text(d) or f"no step time for {gpus} GPUs"
        return nothing(NoFigure.NO_STEP_TIME, d.device, detail)
    if plan.run is None or not plan.run.sized:
        return nothing(NoFigure.NO_RUN, d.device)
    device = get_device(d.device)
    per_gpu = step.micro_batch * step.grad_accum
    return Found(value=_hours(plan, device, step, per_gpu, gpus, d.setting.precision))


def trainable_percent(model: ModelSection) -> Found:
    return Found(value=100.0 * model.trainable_parameters / max(1, model.parameters))


_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}
"""Bytes a weight takes in each precision a claim may name."""


def weights_gib(model: ModelSection, precision: str | None) -> Found:
    """All parameters in the claim's precision (fp32 unless it names one)."""
    name = precision or "fp32"
    if name not in _BYTES:
        raise TrainfitError(f"weights precision {name!r} is not one of {', '.join(_BYTES)}")
    return Found(value=model.parameters * _BYTES[name] / GIB)


def component_gib(memory: DeviceMemory, components: tuple[str, ...]) -> Found:
    """The breakdown's components summed at the plan's micro-batch."""
    parts = dict(memory.breakdown)
    if not parts:
        return nothing(NoFigure.NO_BREAKDOWN, memory.device, memory.note)
    unknown = [c for c in components if c not in parts]
    if unknown:
        raise TrainfitError(f"component {unknown[0]!r} is not one of {', '.join(parts)}")
    return Found(value=sum(parts[c] for c in components) / GIB)


def _watts(device: Device, run: RunSpec) -> float | None:
    board = device.tdp_watts.value
    return run.watts if run.watts is not None else (None if board is None else float(board))


def _price(device: Device) -> float | None:
    if device.price is None or device.price.currency != "USD":
        return None
    value = device.price.amount.value
    return None if value is None else float(value)


def power_watts(device: Device, run: RunSpec) -> Found:
    watts = _watts(device, run)
    return nothing(NoFigure.NO_POWER, device.name) if watts is None else Found(value=watts)


def electricity_usd(device: Device, run: RunSpec) -> Found:
    """The device's power over its life (years x hours a year) at the run's kWh price."""
    watts = _watts(device, run)
    if watts is None:
        return nothing(NoFigure.NO_POWER, device.name)
    life_hours = run.years * run.hours_per_year
    return Found(value=watts * life_hours / 1000 * run.kwh_price * run.rate)


def price_usd(device: Device) -> Found:
    price = _price(device)
    return nothing(NoFigure.NO_PRICE, device.name) if price is None else Found(value=price)


def spot_saves_percent(device: Device) -> Found:
    """The most a spot instance of the device saves against its on-demand rate, over the
    catalog's instances of it that have both rates."""
    saved = [
        100.0 * (1.0 - float(i.spot_usd_per_hour.value) / float(i.on_demand_usd_per_hour.value))
        for i in instances().values()
        if _gpu_of(i.gpu) == device.name
        and i.spot_usd_per_hour.value is not None
        and i.on_demand_usd_per_hour.value
    ]
    if saved:
        return Found(value=max(saved))
    return nothing(NoFigure.NO_PRICE, device.name, "the catalog has no spot rate for its instances")


def _gpu_of(name: str) -> str:
    try:
        return get_device(name).name
    except TrainfitError:
        return ""


def ownership_usd(device: Device, run: RunSpec) -> Found:
    """The purchase price and the electricity over the device's life."""
    price = _price(device)
    if price is None:
        return nothing(NoFigure.NO_PRICE, device.name)
    power = electricity_usd(device, run)
    if power.value is None:
        return power
    return Found(value=price * run.rate + power.value)


def usd_per_hour(d: DevicePlan) -> Found:
    """The cheapest on-demand rate of the catalog's cloud instances of the device."""
    rates = [
        c.on_demand / c.hours
        for c in d.costs
        if c.kind != "local" and c.on_demand is not None and c.hours and c.hours > 0
    ]
    if rates:
        return Found(value=min(rates))
    if d.setting is None:
        return does_not_fit(d)
    return nothing(NoFigure.NO_PRICE, d.device, "the catalog has no cloud instance of it")


def combined(found: list[Found], combine: str) -> Found:
    missing = next((f for f in found if f.value is None), None)
    if missing is not None:
        return missing
    numbers = [float(f.value) for f in found if f.value is not None]
    total = {
        "max": max(numbers),
        "min": min(numbers),
        "last": numbers[-1],
        "sum": sum(numbers),
    }[combine]
    return Found(value=total)


def compared(compare: str, ours: Found, theirs: Found) -> Found:
    """Two figures set against each other (`ClaimCompare`): ours / theirs ("times"), or the
    percentage ours is less or more than theirs; the first missing one where either is."""
    for found in (ours, theirs):
        if found.value is None:
            return found
    assert ours.value is not None and theirs.value is not None
    if not theirs.value:
        raise TrainfitError("the figure it is compared with is 0: no ratio")
    ratio = float(ours.value) / float(theirs.value)
    value = {
        "times": ratio,
        "percent_less": 100.0 * (1.0 - ratio),
        "percent_more": 100.0 * (ratio - 1.0),
    }[compare]
    return Found(value=value)


OTHER_PER_DEVICE = ("max_micro_batch", "fits", "component_gib", "usable_gib", "usd_per_hour")
"""Per-device quantities `other_per_device` reads."""

COMBINE: dict[str, str] = {
    "memory_gib": "max",
    "micro_batch": "last",
    "gpus": "max",
    "step_seconds": "last",
    "tokens_per_second": "last",
    "hours": "sum",
    "max_micro_batch": "min",
    "fits": "min",
    "component_gib": "max",
    "usable_gib": "max",
    "usd_per_hour": "max",
}
"""How a per-device quantity's figures over a plan's stages combine (see `combined`)."""


def other_per_device(
    claim: Claim, entries: list[tuple[StageSection, DevicePlan, DeviceMemory]]
) -> Found:
    q = claim.quantity
    found = []
    for _, d, memory in entries:
        if q == "max_micro_batch":
            found.append(Found(value=float(d.max_micro_batch)))
        elif q == "fits":
            found.append(Found(value=1.0 if d.setting is not None else 0.0))
        elif q == "component_gib":
            if not claim.component:
                raise TrainfitError("component_gib needs `component`: the parts to sum")
            found.append(component_gib(memory, claim.component))
        elif q == "usable_gib":
            usable = memory.usable_bytes
            found.append(
                nothing(NoFigure.NO_BREAKDOWN, d.device)
                if usable is None
                else Found(value=usable / GIB)
            )
        else:
            found.append(usd_per_hour(d))
    return combined(found, COMBINE[q])


def at_claim_setting(
    claim: Claim,
    entries: list[tuple[StageSection, DevicePlan, DeviceMemory]],
    caches: dict[int, TraceCache],
) -> Found:
    """The claim's quantity at its own setting, over the stages (memory: the largest; hours:
    summed)."""
    setting = claim.setting
    assert setting is not None
    found = []
    for stage, d, memory in entries:
        cache = caches.setdefault(id(stage.plan), TraceCache())
        at = at_setting(stage.plan, d, memory, setting, claim.gpus or 1, cache)
        usable = at.usable_bytes
        fits = usable is None or at.needed_bytes <= usable
        if claim.quantity == "memory_gib":
            found.append(Found(value=at.needed_bytes / GIB))
        elif claim.quantity == "fits":
            found.append(Found(value=1.0 if fits else 0.0))
        elif not fits:
            found.append(
                Found(
                    value=None,
                    missing=Missing(
                        why=NoFigure.DOES_NOT_FIT,
                        device=d.device,
                        needed_bytes=at.needed_bytes,
                        usable_bytes=usable,
                    ),
                )
            )
        elif at.step is None:
            found.append(Found(value=None, missing=at.no_step))
        elif claim.quantity == "step_seconds":
            found.append(Found(value=round(at.step.seconds, 6)))
        elif claim.quantity == "tokens_per_second":
            tokens = at.step.tokens_per_second
            found.append(Found(value=None if tokens is None else round(tokens, 1)))
        elif at.hours is None:
            found.append(nothing(NoFigure.NO_RUN, d.device))
        else:
            found.append(Found(value=at.hours))
    return combined(found, COMBINE[claim.quantity])
