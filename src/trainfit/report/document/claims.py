"""A source document's figures beside trainfit's: `check_claims(claims, models)`.

Quantities (the spec file's `claims[].quantity`): memory_gib (device memory the setting
needs; a staged schedule's largest stage), micro_batch (the setting's), step_seconds (one
optimizer step, the run's when it has one), hours (the run; a schedule's summed), cost_usd
(the local cost of the run on the device, or the cost on a named cloud instance; summed over
stages), params_millions (all parameters), tokens_per_second (the setting's step); and from
the inference table (`ModelSection.inference`): latency_ms (a request's latency: prefill plus
decode for generation, the forward for a plain module), decode_tokens_per_second (generation),
inference_memory_gib (device memory the inference needs). An inference claim is matched by model
and device, and by precision and batch where it gives them; it must then match one row.

A claim agrees when trainfit's figure is within 25% of it (of the nearer end of a range).
Known limitations: costs are compared in the run's currency, whatever it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from trainfit.distributed.search import DistributedPlan
from trainfit.errors import SpecError, TrainfitError
from trainfit.hardware.catalog import get_device
from trainfit.plan.options import DevicePlan, NoTime, Plan
from trainfit.plan.words import time_text
from trainfit.report.document.model import Claim, ClaimCheck, ModelSection
from trainfit.timing.run import CostLine

GIB = 2**30
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


_PER_DEVICE: dict[str, tuple[Callable[[DevicePlan], float | None], str]] = {
    "memory_gib": (_memory, "max"),
    "micro_batch": (_micro_batch, "last"),
    "gpus": (_gpus, "max"),
    "step_seconds": (_step, "last"),
    "tokens_per_second": (_tokens, "last"),
    "hours": (_hours, "sum"),
}
_INFERENCE: dict[str, str] = {
    "latency_ms": "total_ms",
    "decode_tokens_per_second": "decode_tokens_per_second",
    "inference_memory_gib": "memory_gib",
}
"""Inference quantity -> the InferenceRow field it reads."""
QUANTITIES = (*sorted((*_PER_DEVICE, *_INFERENCE, "cost_usd", "params_millions")),)


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
    )


def check_claims(
    claims: Iterable[object], models: Sequence[ModelSection]
) -> tuple[ClaimCheck, ...]:
    """Each claim beside trainfit's figure; SpecError naming every claim whose model, device or
    quantity cannot be found."""
    problems: list[str] = []
    checks = []
    for item in claims:
        claim = as_claim(item)
        try:
            checks.append(_check(claim, models))
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


def _trainfit(claim: Claim, model: ModelSection) -> tuple[str, float | None, str]:
    """(device, trainfit's figure, a note)."""
    q = claim.quantity
    if q == "params_millions":
        return claim.device or "", model.parameters / 1e6, ""
    if q in _INFERENCE:
        return _inference(claim, model)
    if q not in _PER_DEVICE and q != "cost_usd":
        raise TrainfitError(f"quantity {q!r} is not one of {', '.join(QUANTITIES)}")
    names = sorted({d.device for s in model.stages for d in s.plan.devices})
    device = claim.device
    if device is None:
        if len(names) != 1:
            raise TrainfitError(f"name its device: one of {', '.join(names)}")
        device = names[0]
    if q == "cost_usd":
        return device, *_cost(model, device, names)
    entries = _devices(model, device)
    if not entries:
        raise TrainfitError(
            f"device {device!r} is not in the plan of {model.name}: one of {', '.join(names)}"
        )
    read, combine = _PER_DEVICE[q]
    values = [read(d) for _, d in entries]
    if q == "hours":  # NB: a device that trains only over several GPUs: its multi-GPU plan's
        runs = [multi_gpu_run(plan, d.distributed) for plan, d in entries]
        values = [
            v if v is not None or r is None else r[0] for v, r in zip(values, runs, strict=True)
        ]
    missing = next((d for (_, d), v in zip(entries, values, strict=True) if v is None), None)
    if missing is not None:
        return device, None, _why_missing(missing, q)
    numbers = [float(v) for v in values if v is not None]
    total = {"max": max(numbers), "last": numbers[-1], "sum": sum(numbers)}[combine]
    return device, total, ""


def _why_missing(d: DevicePlan, quantity: str) -> str:
    """Why a device's entry has no figure for `quantity`: no setting fits, or the setting fits
    but its time is not modelled (the plan's time note says why) or not worked out."""
    s = d.setting
    if s is None:
        return "no setting fits on this device"
    fits = (
        f"the setting fits: micro-batch {s.micro_batch} x {s.grad_accum}, "
        f"{s.needed_bytes / GIB:.2f} GiB"
    )
    why = time_text(d)
    if why:
        if d.no_time is not None and d.no_time.why in (
            NoTime.MULTI_GPU_NOT_CUDA,
            NoTime.NO_GPU_COUNT,
        ):
            why = f"step time not modelled: {why}"
        return f"{why}; {fits}"
    if quantity == "hours":
        return f"no run hours (the plan was given no data size); {fits}"
    return f"no {quantity.replace('_', ' ')} in the plan; {fits}"


def _inference(claim: Claim, model: ModelSection) -> tuple[str, float | None, str]:
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
        return device, None, why
    return device, float(value), f"{row.kind}, {row.precision}, batch {row.batch}"


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


def _cost(model: ModelSection, device: str, names: list[str]) -> tuple[float | None, str]:
    """The local cost on a planned device, the cost on a cloud instance, or the on-demand cost
    of its multi-GPU plan's instances, over the stages."""
    total, currency, found = 0.0, "", False
    for stage in model.stages:
        for d in stage.plan.devices:
            many = multi_gpu_run(stage.plan, d.distributed) if d.setting is None else None
            if many is not None and d.device in (device, _canonical(device)):
                found = True
                total += many[1]
                currency = "USD"
                continue
            for line in d.costs:
                mine = line.option == device or (
                    line.kind == "local" and d.device in (device, _canonical(device))
                )
                if not mine:
                    continue
                found = True
                if line.total is None:
                    return None, line.note or "no price for this option"
                total += round(line.total, 2)  # NB: as the plan's JSON rounds it
                currency = line.currency
    if not found:
        raise TrainfitError(
            f"no cost for {device!r} in the plan of {model.name} (give the run's data size; "
            f"devices: {', '.join(names)}, or a cloud instance the plan priced)"
        )
    return total, "" if currency == "USD" else f"in {currency}"


def _check(claim: Claim, models: Sequence[ModelSection]) -> ClaimCheck:
    model = _model(claim, models)
    device, ours, note = _trainfit(claim, model)
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
    return ClaimCheck(
        what=claim.what,
        model=model.name,
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
    )
