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

from trainfit.errors import SpecError, TrainfitError
from trainfit.hardware.catalog import get_device
from trainfit.report.document.model import Claim, ClaimCheck, ModelSection

GIB = 2**30
TOLERANCE = 0.25
"""How far trainfit's figure may be from the document's and still agree (a fraction)."""

_Device = dict[str, object]


def _setting(d: _Device, key: str) -> float | None:
    s = d.get("setting")
    return None if not isinstance(s, dict) else float(s[key])


def _micro_batch(d: _Device) -> float | None:
    """The setting's micro-batch, or per GPU of the multi-GPU plan where one GPU holds none."""
    one = _setting(d, "micro_batch")
    many = d.get("distributed")
    if one is None and isinstance(many, dict):
        return float(many["micro_batch"])
    return one


def _gpus(d: _Device) -> float | None:
    """GPUs the plan trains on: the multi-GPU plan's count, else 1 where one GPU holds it."""
    many = d.get("distributed")
    if isinstance(many, dict):
        return float(many["gpus"])
    return None if _setting(d, "micro_batch") is None else 1.0


def _memory(d: _Device) -> float | None:
    v = _setting(d, "needed_bytes")
    return None if v is None else v / GIB


def _step(d: _Device) -> float | None:
    run, time = d.get("run"), d.get("time")
    if isinstance(run, dict) and run.get("step_seconds") is not None:
        return float(run["step_seconds"])
    if isinstance(time, dict) and time.get("step_seconds") is not None:
        return float(time["step_seconds"])
    return None


def _tokens(d: _Device) -> float | None:
    time = d.get("time")
    if isinstance(time, dict) and time.get("tokens_per_second") is not None:
        return float(time["tokens_per_second"])
    return None


def _hours(d: _Device) -> float | None:
    run = d.get("run")
    return float(run["hours"]) if isinstance(run, dict) and run.get("hours") is not None else None


_PER_DEVICE: dict[str, tuple[Callable[[_Device], float | None], str]] = {
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
        batch=None if get("batch") is None else int(get("batch")),
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


def _devices(model: ModelSection, name: str) -> list[_Device]:
    """The device's entry in each stage's plan."""
    found = []
    for stage in model.stages:
        devices = stage.plan.get("devices")
        assert isinstance(devices, list)
        found += [d for d in devices if d["device"] in (name, _canonical(name))]
    return found


def _trainfit(claim: Claim, model: ModelSection) -> tuple[str, float | None, str]:
    """(device, trainfit's figure, a note)."""
    q = claim.quantity
    if q == "params_millions":
        return claim.device or "", model.parameters / 1e6, ""
    if q in _INFERENCE:
        return _inference(claim, model)
    if q not in _PER_DEVICE and q != "cost_usd":
        raise TrainfitError(f"quantity {q!r} is not one of {', '.join(QUANTITIES)}")
    names = sorted({str(d["device"]) for s in model.stages for d in s.plan["devices"]})  # type: ignore[union-attr]
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
    values = [read(d) for d in entries]
    if q == "hours":  # NB: a device that trains only over several GPUs: its multi-GPU plan's
        runs = [
            multi_gpu_run(stage.plan, d)
            for stage in model.stages
            for d in stage.plan["devices"]  # type: ignore[union-attr]
            if d["device"] in (device, _canonical(device))
        ]
        values = [
            v if v is not None or r is None else r[0] for v, r in zip(values, runs, strict=True)
        ]
    missing = next((d for d, v in zip(entries, values, strict=True) if v is None), None)
    if missing is not None:
        return device, None, _why_missing(missing, q)
    numbers = [float(v) for v in values if v is not None]
    total = {"max": max(numbers), "last": numbers[-1], "sum": sum(numbers)}[combine]
    return device, total, ""


def _why_missing(d: _Device, quantity: str) -> str:
    """Why a device's entry has no figure for `quantity`: no setting fits, or the setting fits
    but its time is not modelled (the plan's time_note says why) or not worked out."""
    s = d.get("setting")
    if not isinstance(s, dict):
        return "no setting fits on this device"
    fits = (
        f"the setting fits: micro-batch {s['micro_batch']} x {s['grad_accum']}, "
        f"{float(s['needed_bytes']) / GIB:.2f} GiB"
    )
    why = str(d.get("time_note") or "")
    if why:
        if not why.startswith("step time not modelled"):
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
        choices = ", ".join(f"{r.precision} batch {r.batch}" for r in found)
        raise TrainfitError(f"name its precision and batch: {choices}")
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


def multi_gpu_run(
    plan: Mapping[str, object], d: Mapping[str, object]
) -> tuple[float, float] | None:
    """(hours, on-demand USD) of a device's multi-GPU plan over the plan's run: steps of the
    effective batch x its step time, priced at its instance's rate; None without a multi-GPU
    plan, a step time or a data size (samples)."""
    many, run = d.get("distributed"), plan.get("run")
    if not isinstance(many, dict) or not isinstance(run, dict):
        return None
    step, samples = many.get("step_seconds"), run.get("samples")
    if step is None or not samples:
        return None
    # NB: whole optimizer steps of the effective batch per epoch, as the one-GPU run counts them
    steps = math.ceil(float(samples) / float(plan["effective_batch"])) * float(run["epochs"])  # type: ignore[arg-type]
    hours = steps * float(step) / 3600
    rate = float(many.get("usd_per_hour") or 0) * float(many.get("instances") or 0)
    return hours, hours * rate


def _cost(model: ModelSection, device: str, names: list[str]) -> tuple[float | None, str]:
    """The local cost on a planned device, the cost on a cloud instance, or the on-demand cost
    of its multi-GPU plan's instances, over the stages."""
    total, currency, found = 0.0, "", False
    for stage in model.stages:
        for d in stage.plan["devices"]:  # type: ignore[union-attr]
            many = multi_gpu_run(stage.plan, d) if d.get("setting") is None else None
            if many is not None and d["device"] in (device, _canonical(device)):
                found = True
                total += many[1]
                currency = "USD"
                continue
            for line in d.get("costs", []):
                mine = line["option"] == device or (
                    line["kind"] == "local" and d["device"] in (device, _canonical(device))
                )
                if not mine:
                    continue
                found = True
                if line.get("total") is None:
                    return None, line.get("note") or "no price for this option"
                total += float(line["total"])
                currency = str(line.get("currency", "USD"))
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
