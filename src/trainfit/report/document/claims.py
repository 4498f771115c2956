"""A source document's figures beside trainfit's: `check_claims(claims, models)`.

Quantities (the spec file's `claims[].quantity`): memory_gib (device memory the setting
needs; a staged schedule's largest stage), micro_batch (the setting's), max_micro_batch (the
largest that fits; a schedule's smallest), fits (1 when one GPU holds the job, else 0), gpus,
step_seconds (one optimizer step, the run's when it has one), hours (the run; a schedule's
summed; a device that trains only over several GPUs: its multi-GPU plan's, unless the claim
names `gpus`), cost_usd (the local cost of the run on the device, or the cost on a named cloud
instance; summed over stages), tokens_per_second (the setting's step), usd_per_hour (the
cheapest on-demand instance of the device), component_gib (the memory breakdown's components),
usable_gib (the device's memory inside the margin), checkpointing_saves_percent (the share
of the kept activations checkpointing saves, at the claim's setting or the plan's);
params_millions, trainable_percent and weights_gib (all parameters in the claim's precision)
of the model; power_watts,
electricity_usd (over the years x hours a year of the run's cost section), price_usd,
ownership_usd (the price and that electricity) and spot_saves_percent (the most a spot
instance saves on the on-demand rate) of the device; and from the inference table
(`ModelSection.inference`): latency_ms (a request's latency: prefill plus decode for
generation, the forward for a plain module), decode_tokens_per_second (generation),
inference_memory_gib (device memory the inference needs). An inference claim is matched by
model and device, and by precision and batch where it gives them; it must then match one row.

A claim's `setting` (micro-batch, accumulation, precision, checkpointing) has memory_gib,
fits, step_seconds, tokens_per_second, hours and component_gib computed at it
(`figures.at_setting`); its `gpus` puts hours on that many GPUs; its `models` sums several
models' figures; its `stage` picks one stage of a schedule; its `versus` makes it a
comparison of two of trainfit's figures of the quantity (ours / theirs, or percent less or
more: `figures.compared`), the other at `versus`'s device, setting, model or components.
Where trainfit has no figure the check says why (`Missing`).

A claim agrees when trainfit's figure is within 25% of it (of the nearer end of a range).
Known limitations: costs are compared in the run's currency, whatever it is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from trainfit.distributed.search import DistributedPlan
from trainfit.errors import SpecError, TrainfitError
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.hardware.units import GIB
from trainfit.plan.cost_words import cost_notes_text
from trainfit.plan.options import DevicePlan, Plan
from trainfit.plan.traces import TraceCache
from trainfit.plan.words import time_text
from trainfit.report.document.figures import (
    COMBINE,
    OTHER_PER_DEVICE,
    Found,
    at_claim_setting,
    checkpointing_saves,
    combined,
    compared,
    components_at_setting,
    does_not_fit,
    electricity_usd,
    hours_on_gpus,
    nothing,
    other_per_device,
    ownership_usd,
    power_watts,
    price_usd,
    spot_saves_percent,
    trainable_percent,
    weights_gib,
)
from trainfit.report.document.model import (
    Claim,
    ClaimCheck,
    ClaimSetting,
    ClaimVersus,
    DeviceMemory,
    ModelSection,
    NoFigure,
    StageSection,
)
from trainfit.specfile.schema import ClaimCompare, ClaimQuantity, ClaimReason
from trainfit.timing.run import CostLine, RunSpec

REASONS = tuple(r.value for r in ClaimReason)
"""The reasons a claim may give."""
TOLERANCE = 0.25
"""How far trainfit's figure may be from the document's and still agree (a fraction)."""


def _micro_batch(d: DevicePlan) -> float | None:
    """The setting's micro-batch, or per GPU of the multi-GPU plan where one GPU holds none."""
    if d.setting is None and d.distributed is not None:
        return float(d.distributed.micro_batch)
    return None if d.setting is None else float(d.setting.micro_batch)


def _gpus(d: DevicePlan) -> float | None:
    """GPUs the plan trains on: the multi-GPU plan's count, else 1 where one GPU holds it."""
    if d.distributed is not None:
        return float(d.distributed.gpus)
    return None if d.setting is None else 1.0


def _memory(d: DevicePlan) -> float | None:
    return None if d.setting is None else d.setting.needed_bytes / GIB


def _step(d: DevicePlan) -> float | None:
    if d.run is not None:
        return float(d.run.step_seconds)
    # NB: rounded as the plan's JSON rounds it
    return None if d.step_time is None else round(d.step_time.seconds, 6)


def _tokens(d: DevicePlan) -> float | None:
    time = d.step_time
    if time is None or time.tokens_per_second is None:
        return None
    return round(time.tokens_per_second, 1)


def _hours(d: DevicePlan) -> float | None:
    return None if d.run is None else float(d.run.hours)


def local_cost(d: DevicePlan) -> CostLine | None:
    """The cost of the run on the device itself (None when not worked out)."""
    return next((c for c in d.costs if c.kind == "local"), None)


_PER_DEVICE: dict[str, Callable[[DevicePlan], float | None]] = {
    "memory_gib": _memory,
    "micro_batch": _micro_batch,
    "gpus": _gpus,
    "step_seconds": _step,
    "tokens_per_second": _tokens,
    "hours": _hours,
}
_INFERENCE: dict[str, str] = {
    "latency_ms": "total_ms",
    "decode_tokens_per_second": "decode_tokens_per_second",
    "inference_memory_gib": "memory_gib",
}
"""Inference quantity -> the InferenceRow field it reads."""
QUANTITIES = tuple(sorted(q.value for q in ClaimQuantity))
"""The quantities a claim can name (`ClaimQuantity`), sorted."""
COMPARES = tuple(c.value for c in ClaimCompare)
"""How a comparison claim sets its two figures against each other (`ClaimCompare`)."""


def as_claim(item: object) -> Claim:
    """A Claim from a Claim, a mapping or an object with the same fields (a spec file's)."""
    if isinstance(item, Claim):
        return item
    get = (
        item.get if isinstance(item, Mapping) else lambda k, default=None: getattr(item, k, default)
    )
    value = get("value")
    if isinstance(value, (list, tuple)):
        value = (float(value[0]), float(value[1]))
    elif isinstance(value, (int, float)):
        value = float(value)
    else:
        raise SpecError(
            [f"claim {get('what')!r}: value must be a number or [low, high], got {value!r}"]
        )
    return Claim(
        what=str(get("what") or ""),
        # NB: the spec file's ClaimQuantity is a str Enum, whose str() is its name on 3.11+
        quantity=str(getattr(get("quantity"), "value", get("quantity")) or ""),
        value=value,
        model=get("model"),
        device=get("device"),
        precision=None if get("precision") is None else str(get("precision")),
        batch=None if (batch := get("batch")) is None else int(batch),
        source=str(get("source") or ""),
        why=str(get("why") or ""),
        reason=_value(get("reason")),
        models=tuple(get("models") or ()),
        stage=None if (stage := get("stage")) is None else int(stage),
        component=_names(get("component")),
        gpus=None if (gpus := get("gpus")) is None else int(gpus),
        setting=_setting(get("setting")),
        versus=_versus(get("versus")),
    )


def _versus(x: object) -> ClaimVersus | None:
    """A comparison claim's other figure from a ClaimVersus, a mapping or a spec file's."""
    if x is None or isinstance(x, ClaimVersus):
        return x
    get = x.get if isinstance(x, Mapping) else lambda k, default=None: getattr(x, k, default)
    compare = _value(get("compare")) or ""
    if compare not in COMPARES:
        raise SpecError([f"versus.compare {compare!r} is not one of {', '.join(COMPARES)}"])
    return ClaimVersus(
        compare=compare,
        device=get("device"),
        setting=_setting(get("setting")),
        model=get("model"),
        models=tuple(get("models") or ()),
        component=_names(get("component")),
    )


def _value(x: object) -> str | None:
    """A str Enum's value (a spec file's), or the string itself."""
    return None if x is None else str(getattr(x, "value", x))


def _names(x: object) -> tuple[str, ...]:
    if x is None:
        return ()
    return (str(x),) if isinstance(x, str) else tuple(str(v) for v in x)  # type: ignore[attr-defined]


def _setting(x: object) -> ClaimSetting | None:
    """A claim's setting from a ClaimSetting, a mapping or a spec file's ClaimSetting."""
    if x is None or isinstance(x, ClaimSetting):
        return x
    get = x.get if isinstance(x, Mapping) else lambda k, default=None: getattr(x, k, default)
    return ClaimSetting(
        micro_batch=int(get("micro_batch")),
        grad_accum=int(get("grad_accum") or 1),
        precision=_value(get("precision")),
        checkpointing=bool(get("checkpointing") or False),
        compile=bool(get("compile") or False),
    )


def check_claims(
    claims: Iterable[object], models: Sequence[ModelSection]
) -> tuple[ClaimCheck, ...]:
    """Each claim beside trainfit's figure; SpecError naming every claim whose model, device or
    quantity cannot be found."""
    problems: list[str] = []
    checks = []
    caches: dict[int, TraceCache] = {}
    for item in claims:
        claim = as_claim(item)
        try:
            if claim.reason is not None and claim.reason not in REASONS:
                raise TrainfitError(f"reason {claim.reason!r} is not one of {', '.join(REASONS)}")
            checks.append(_check(claim, models, caches))
        except TrainfitError as exc:
            problems.append(f"claim {claim.what!r}: {exc}")
    if problems:
        raise SpecError(problems)
    return tuple(checks)


def _model(claim: Claim, models: Sequence[ModelSection]) -> ModelSection:
    if claim.model is None:
        if len(models) == 1:
            return models[0]
        raise TrainfitError(f"name its model: one of {', '.join(m.name for m in models)}")
    for m in models:
        if claim.model in (m.name, m.model):
            return m
    raise TrainfitError(
        f"model {claim.model!r} is not in the plan: one of {', '.join(m.name for m in models)}"
    )


def _canonical(name: str) -> str:
    try:
        return get_device(name).name
    except TrainfitError:
        return name


def _devices(model: ModelSection, name: str) -> list[tuple[Plan, DevicePlan]]:
    """The device's entry in each stage's plan, with the plan."""
    return [
        (stage.plan, d)
        for stage in model.stages
        for d in stage.plan.devices
        if d.device in (name, _canonical(name))
    ]


_SETTING = ("memory_gib", "step_seconds", "hours", "fits", "tokens_per_second")
"""Quantities computed at a claim's own setting when it gives one."""
_DEVICE = {
    "power_watts": power_watts,
    "electricity_usd": electricity_usd,
    "ownership_usd": ownership_usd,
}
"""Device-level quantities (the device and the run's prices, no plan needed)."""


def _trainfit(
    claim: Claim, model: ModelSection, caches: dict[int, TraceCache]
) -> tuple[str, Found, str]:
    """(device, trainfit's figure, a note)."""
    q = claim.quantity
    if q == "params_millions":
        return claim.device or "", Found(value=model.parameters / 1e6), ""
    if q == "trainable_percent":
        return claim.device or "", trainable_percent(model), ""
    if q == "weights_gib":
        return claim.device or "", weights_gib(model, claim.precision), ""
    if q in _INFERENCE:
        return _inference(claim, model)
    if q in _DEVICE or q in ("price_usd", "spot_saves_percent"):
        if claim.device is None:
            raise TrainfitError("name its device")
        device = get_device(claim.device)
        if q == "price_usd":
            return device.name, price_usd(device), ""
        if q == "spot_saves_percent":
            return device.name, spot_saves_percent(device), ""
        return device.name, _DEVICE[q](device, _run(model)), ""
    if q not in (*_PER_DEVICE, *OTHER_PER_DEVICE, "checkpointing_saves_percent", "cost_usd"):
        raise TrainfitError(f"quantity {q!r} is not one of {', '.join(QUANTITIES)}")
    names = sorted({d.device for s in model.stages for d in s.plan.devices})
    device = claim.device
    if device is None:
        if len(names) != 1:
            raise TrainfitError(f"name its device: one of {', '.join(names)}")
        device = names[0]
    if q == "cost_usd":
        return device, _cost(claim, model, device, names), ""
    entries = _entries(claim, model, device)
    if not entries:
        if _is_cpu(device):
            return device, nothing(NoFigure.HOST_DEPENDENT, device), ""
        raise TrainfitError(
            f"device {device!r} is not in the plan of {model.name}: one of {', '.join(names)}"
        )
    if claim.setting is not None and claim.setting.compile:
        return device, nothing(NoFigure.COMPILED, device), ""
    if q == "checkpointing_saves_percent":
        return device, _saves(claim, entries, caches), ""
    if claim.setting is not None and q == "component_gib":
        return device, components_at_setting(claim, entries, caches), ""
    if claim.setting is not None and q in _SETTING:
        return device, at_claim_setting(claim, entries, caches), ""
    if q in OTHER_PER_DEVICE:
        return device, other_per_device(claim, entries), ""
    return device, _per_device(claim, entries), ""


def _run(model: ModelSection) -> RunSpec:
    """The model's run (its prices), or the defaults where the plan has none."""
    runs = [s.plan.run for s in model.stages if s.plan.run is not None]
    return runs[-1] if runs else RunSpec()


def _is_cpu(name: str) -> bool:
    try:
        return get_device(name).kind is DeviceKind.CPU
    except TrainfitError:
        return False


def _entries(
    claim: Claim, model: ModelSection, name: str
) -> list[tuple[StageSection, DevicePlan, DeviceMemory]]:
    """The device's entry in each stage's plan (the claim's stage only, when it names one)."""
    stages = list(enumerate(model.stages, 1))
    if claim.stage is not None:
        if not 1 <= claim.stage <= len(stages):
            raise TrainfitError(f"stage {claim.stage}: the plan of {model.name} has {len(stages)}")
        stages = [stages[claim.stage - 1]]
    return [
        (stage, d, m)
        for _, stage in stages
        for d, m in zip(stage.plan.devices, stage.memory, strict=True)
        if d.device in (name, _canonical(name))
    ]


def _per_device(
    claim: Claim, entries: list[tuple[StageSection, DevicePlan, DeviceMemory]]
) -> Found:
    """A plan field's figure over the stages; a device that trains only over several GPUs
    takes its multi-GPU plan's hours unless the claim is about a GPU count."""
    q = claim.quantity
    read, combine = _PER_DEVICE[q], COMBINE[q]
    found: list[Found] = []
    for stage, d, _ in entries:
        if claim.gpus == 1 and d.setting is None:
            found.append(does_not_fit(d))  # NB: not the multi-GPU plan's figures
            continue
        value = read(d)
        if q == "hours" and claim.gpus is not None and (claim.gpus > 1 or value is None):
            found.append(hours_on_gpus(stage.plan, d, claim.gpus))
            continue
        if value is None and q == "hours" and claim.gpus is None:
            many = multi_gpu_run(stage.plan, d.distributed)
            value = None if many is None else many[0]
        found.append(Found(value=value) if value is not None else _why_missing(d, q))
    return combined(found, combine)


def _saves(
    claim: Claim,
    entries: list[tuple[StageSection, DevicePlan, DeviceMemory]],
    caches: dict[int, TraceCache],
) -> Found:
    """The share of the kept activations checkpointing saves, at the claim's setting (else
    the plan's), over the stages (the least)."""
    found = []
    for stage, d, _ in entries:
        setting = claim.setting
        if setting is None:
            if d.setting is None:
                found.append(does_not_fit(d))
                continue
            setting = ClaimSetting(
                micro_batch=d.setting.micro_batch, precision=d.setting.precision.value
            )
        cache = caches.setdefault(id(stage.plan), TraceCache())
        found.append(checkpointing_saves(stage.plan, d, setting, cache))
    return combined(found, "min")


def _why_missing(d: DevicePlan, quantity: str) -> Found:
    """Why a device's entry has no figure for `quantity`: no setting fits, or the setting fits
    but its time is not modelled (the plan's time note says why) or not worked out."""
    if d.setting is None:
        return does_not_fit(d)
    why = time_text(d)
    if why:
        return nothing(NoFigure.NO_STEP_TIME, d.device, why)
    return nothing(NoFigure.NO_RUN, d.device)


def _inference(claim: Claim, model: ModelSection) -> tuple[str, Found, str]:
    """(device, the matching inference row's figure, a note)."""
    rows = model.inference
    if not rows:
        raise TrainfitError(
            f"the plan of {model.name} has no inference table: add `inference:` to the spec "
            "file (or --inference) to compare an inference figure"
        )
    names = sorted({r.device for r in rows})
    device = claim.device
    if device is None:
        if len(names) != 1:
            raise TrainfitError(f"name its device: one of {', '.join(names)}")
        device = names[0]
    found = [r for r in rows if r.device in (device, _canonical(device))]
    if not found:
        raise TrainfitError(
            f"device {device!r} is not in the inference table of {model.name}: one of "
            f"{', '.join(names)}"
        )
    if claim.precision is not None:
        found = [r for r in found if r.precision == claim.precision]
    if claim.batch is not None:
        found = [r for r in found if r.batch == claim.batch]
    if not found:
        choices = sorted({f"{r.precision} batch {r.batch}" for r in rows if r.device == device})
        raise TrainfitError(
            f"no inference row of {model.name} on {device} at the claim's precision/batch: "
            f"one of {', '.join(choices)}"
        )
    if len(found) > 1:
        several = ", ".join(f"{r.precision} batch {r.batch}" for r in found)
        raise TrainfitError(f"name its precision and batch: {several}")
    row = found[0]
    value = getattr(row, _INFERENCE[claim.quantity])
    if value is None:
        why = (
            row.note
            if row.kind == "refused"
            else f"no {claim.quantity} for a {row.kind}: generation is estimated for causal LMs"
        )
        return device, nothing(NoFigure.NO_INFERENCE, device, why), ""
    return device, Found(value=float(value)), f"{row.kind}, {row.precision}, batch {row.batch}"


def multi_gpu_run(plan: Plan, many: DistributedPlan | None) -> tuple[float, float] | None:
    """(hours, on-demand USD) of a device's multi-GPU plan over the plan's run: steps of the
    effective batch x its step time, priced at its instance's rate; None without a multi-GPU
    plan, a step time or a data size (samples)."""
    run = plan.run
    if many is None or run is None or many.step_seconds is None or not run.samples:
        return None
    # NB: whole optimizer steps of the effective batch per epoch, as the one-GPU run counts them
    steps = math.ceil(float(run.samples) / float(plan.effective_batch)) * float(run.epochs)
    # NB: the step time rounded as the plan's JSON rounds it
    hours = steps * round(many.step_seconds, 4) / 3600
    rate = float(many.usd_per_hour or 0) * float(many.instances or 0)
    return hours, hours * rate


def _cost(claim: Claim, model: ModelSection, device: str, names: list[str]) -> Found:
    """The local cost on a planned device, the cost on a cloud instance, or the on-demand cost
    of its multi-GPU plan's instances (not for a claim about one GPU), over the stages."""
    total, found = 0.0, False
    stages = model.stages if claim.stage is None else model.stages[claim.stage - 1 : claim.stage]
    for stage in stages:
        for d in stage.plan.devices:
            mine = d.device in (device, _canonical(device))
            many = multi_gpu_run(stage.plan, d.distributed) if d.setting is None else None
            if mine and claim.gpus == 1 and d.setting is None:
                return does_not_fit(d)
            if many is not None and mine:
                found = True
                total += many[1]
                continue
            for line in d.costs:
                if not (line.option == device or (line.kind == "local" and mine)):
                    continue
                found = True
                if line.total is None:
                    return nothing(NoFigure.NO_PRICE, device, cost_notes_text(line))
                total += round(line.total, 2)  # NB: as the plan's JSON rounds it
            if mine and not found and d.setting is None:
                return does_not_fit(d)
    if not found:
        raise TrainfitError(
            f"no cost for {device!r} in the plan of {model.name} (give the run's data size; "
            f"devices: {', '.join(names)}, or a cloud instance the plan priced)"
        )
    return Found(value=total)


def _picked(claim: Claim, models: Sequence[ModelSection]) -> list[ModelSection]:
    if not claim.models:
        return [_model(claim, models)]
    return [_model(dataclasses.replace(claim, model=name), models) for name in claim.models]


def _check(
    claim: Claim, models: Sequence[ModelSection], caches: dict[int, TraceCache]
) -> ClaimCheck:
    picked = _picked(claim, models)
    device, found, note = _figure(claim, picked, caches)
    versus, figures, other_device = claim.versus, None, ""
    if versus is not None:
        other = _other(claim, versus)
        other_device, theirs, _ = _figure(other, _picked(other, models), caches)
        if found.value is not None and theirs.value is not None:
            figures = (found.value, theirs.value)
        found, note = compared(versus.compare, found, theirs), ""
    ours = found.value
    low, high = claim.value if isinstance(claim.value, tuple) else (claim.value, claim.value)
    ratio = agrees = None
    if ours is not None:
        nearest = low if ours < low else high if ours > high else None
        if nearest is None:
            ratio = 1.0
        elif nearest:
            ratio = ours / nearest
        if ratio is not None:
            agrees = abs(ratio - 1.0) <= TOLERANCE
        elif claim.quantity == "fits":
            agrees = ours == low
    run = _run(picked[0])
    return ClaimCheck(
        what=claim.what,
        model=" + ".join(m.name for m in picked),
        device=device,
        quantity=claim.quantity,
        low=low,
        high=high,
        trainfit=ours,
        ratio=ratio,
        agrees=agrees,
        source=claim.source,
        why=claim.why,
        note=note,
        reason=claim.reason,
        missing=found.missing,
        setting=claim.setting,
        gpus=claim.gpus,
        samples=run.samples,
        component=claim.component,
        versus=versus,
        versus_device=other_device,
        figures=figures,
    )


def _figure(
    claim: Claim, picked: list[ModelSection], caches: dict[int, TraceCache]
) -> tuple[str, Found, str]:
    """(device, trainfit's figure summed over the picked models, a note)."""
    results = [_trainfit(claim, m, caches) for m in picked]
    note = results[0][2] if len(results) == 1 else ""
    return results[0][0], combined([f for _, f, _ in results], "sum"), note


def _other(claim: Claim, versus: ClaimVersus) -> Claim:
    """The claim of a comparison's other figure: `versus`'s fields, else the claim's (the
    setting: the plan's)."""
    own_models = () if versus.model else claim.models
    return dataclasses.replace(
        claim,
        device=versus.device or claim.device,
        setting=versus.setting,
        model=versus.model or claim.model,
        models=versus.models or own_models,
        component=versus.component or claim.component,
        versus=None,
    )
