"""The report's opening summary: one row per model and device (fits, setting, memory, hours,
cost) with the document's figures for it, each agreeing or not and why in a phrase; and the
words of a claim's typed reason (`ClaimReason`) and of why trainfit has no figure (`Missing`).
"""

from __future__ import annotations

from trainfit.plan.options import DevicePlan, Plan
from trainfit.report.document.claims import TOLERANCE, local_cost, multi_gpu_run
from trainfit.report.document.model import (
    ClaimCheck,
    ClaimSetting,
    Missing,
    ModelSection,
    NoFigure,
    Report,
)
from trainfit.report.document.text import Block, amount, gib, num
from trainfit.report.document.text import heading as _h
from trainfit.report.document.text import para as _p
from trainfit.report.document.text import table as _t
from trainfit.specfile.schema import ClaimReason

_REASONS: dict[ClaimReason, str] = {
    ClaimReason.DATA_LOADING: "data loading not included: trainfit times the training step",
    ClaimReason.DATASET_ASSUMED: "dataset size assumed",
    ClaimReason.MODEL_GUESSED: "the document does not describe the layers: the model is a guess",
    ClaimReason.STATES_LEFT_OUT: "the document leaves out fp32 gradients and optimizer state",
    ClaimReason.USABLE_MEMORY: "trainfit counts Metal's working set (2/3 of the RAM) as usable",
    ClaimReason.NO_DEVICE_SYNC: "the document's benchmark does not synchronise the device",
    ClaimReason.WHOLE_SYSTEM: "the document counts the whole machine, trainfit the GPU",
    ClaimReason.PRICE_IMPLIED: "the document's cost implies another electricity price",
    ClaimReason.SELF_CONTRADICTORY: "the document's own figures for it disagree",
    ClaimReason.BUDGET_SCOPE: "the document's budget covers more than the training run",
    ClaimReason.HEAD_COUNTED: "trainfit counts the classifier head",
    ClaimReason.CONTEXT_FLOOR: "the CUDA context is most of the memory of a model this small",
    ClaimReason.CAUTION: "the document's setting is caution, not the device's limit",
    ClaimReason.AT_THE_PEAK: "trainfit counts what is live at the step's peak",
    ClaimReason.COMPUTE_BOUND: "the GPU is busy at the smaller batch already",
    ClaimReason.FROZEN_NOT_KEPT: "a frozen backbone keeps no activations for backward",
    ClaimReason.NOT_MODELLED_HERE: "trainfit does not model this part",
    ClaimReason.RULE_OF_THUMB: (
        "the document's figure is a rule of thumb, not worked out for this model"
    ),
    ClaimReason.PART_COUNTED: "the document counts only part of what trainfit's figure holds",
    ClaimReason.OTHER_SOURCE: "the document's figure and the catalog's come from other sources",
    ClaimReason.BOARD_POWER: "trainfit counts the card's board power, the most it may draw",
    ClaimReason.OWN_STEP_TIME: "the document's hours follow from its own step time",
    ClaimReason.GPU_COUNT_DIFFERS: (
        "trainfit plans another GPU count: the document's does not hold the model"
    ),
}

_UNITS = {
    "memory_gib": ("memory", "GiB"),
    "micro_batch": ("micro-batch", ""),
    "max_micro_batch": ("largest micro-batch", ""),
    "fits": ("fits (1 yes, 0 no)", ""),
    "gpus": ("GPUs", ""),
    "step_seconds": ("step", "s"),
    "hours": ("hours", "h"),
    "cost_usd": ("cost", "USD"),
    "tokens_per_second": ("tokens/s", ""),
    "params_millions": ("parameters", "M"),
    "trainable_percent": ("trainable", "%"),
    "component_gib": ("memory part", "GiB"),
    "usable_gib": ("usable memory", "GiB"),
    "weights_gib": ("weights", "GiB"),
    "power_watts": ("power", "W"),
    "electricity_usd": ("electricity", "USD"),
    "ownership_usd": ("cost of ownership", "USD"),
    "price_usd": ("price", "USD"),
    "usd_per_hour": ("rate", "USD/h"),
    "spot_saves_percent": ("spot saves", "% of the on-demand rate"),
    "checkpointing_saves_percent": ("checkpointing saves", "% of activations"),
    "latency_ms": ("latency", "ms"),
    "decode_tokens_per_second": ("generation", "tokens/s"),
    "inference_memory_gib": ("inference memory", "GiB"),
}
"""Each quantity's short name and unit in the summary."""


DEVICE_LEVEL = (
    "power_watts",
    "electricity_usd",
    "ownership_usd",
    "price_usd",
    "spot_saves_percent",
)
"""Quantities of a device, not of a model's plan: shown apart from the per-model rows."""


def reason_text(c: ClaimCheck) -> str:
    """The claim's typed reason in a phrase ("" when it gives none)."""
    if c.reason is None:
        return ""
    reason = ClaimReason(c.reason)
    if reason is ClaimReason.DATASET_ASSUMED and c.samples:
        return f"dataset size assumed as {c.samples:,} samples"
    return _REASONS[reason]


def missing_text(m: Missing) -> str:
    """Why trainfit has no figure, in a phrase."""
    if m.why is NoFigure.DOES_NOT_FIT:
        if m.needed_bytes is not None and m.usable_bytes is not None:
            return (
                f"does not fit one {m.device}: needs {gib(m.needed_bytes)} of "
                f"{gib(m.usable_bytes)} usable"
            )
        return f"does not fit one {m.device}"
    words = {
        NoFigure.NO_STEP_TIME: m.detail or f"no step time on {m.device}",
        NoFigure.NO_RUN: "no data size given, so no run hours or costs",
        NoFigure.NO_PRICE: f"no catalog price for {m.device}"
        + (f" ({m.detail})" if m.detail else ""),
        NoFigure.NO_POWER: f"no power figure for {m.device} in the catalog",
        NoFigure.NO_BREAKDOWN: f"no memory breakdown kept for {m.device}",
        NoFigure.NO_INFERENCE: m.detail or "no inference figure",
        NoFigure.COMPILED: (
            "trainfit times eager PyTorch: torch.compile's fused kernels are not modelled"
        ),
        NoFigure.HOST_DEPENDENT: (
            "the CPU is planned against the RAM and the processor of the machine running "
            "trainfit: a report that is the same on every machine leaves it out"
        ),
    }
    return words[m.why]


def setting_text(s: ClaimSetting, gpus: int | None) -> str:
    """The document's setting a figure was computed at."""
    words = f"micro-batch {s.micro_batch} x {s.grad_accum}"
    words += f", {s.precision}" if s.precision else ""
    words += ", checkpointing" if s.checkpointing else ""
    words += ", torch.compile" if s.compile else ""
    return words + (f", {gpus} GPUs" if gpus and gpus > 1 else "")


_COMPARES = {"times": "x", "percent_less": "% less", "percent_more": "% more"}
"""Each comparison's unit (`ClaimCompare`)."""


def versus_text(c: ClaimCheck) -> str:
    """What a comparison claim's figure is set against: the other device, setting, model or
    components, where they differ from the claim's own."""
    v = c.versus
    if v is None:
        return ""
    parts = []
    if c.versus_device and c.versus_device != c.device:
        parts.append(c.versus_device)
    if v.model:
        parts.append(v.model)
    if v.models:
        parts.append(" + ".join(v.models))
    if v.component:
        parts.append(" + ".join(v.component))
    at = "at " if parts else ""
    if v.setting is not None:
        parts.append(at + setting_text(v.setting, None))
    elif c.setting is not None:
        parts.append(at + "the plan's setting")
    return "against " + " ".join(parts)


def figures_text(c: ClaimCheck) -> str:
    """A comparison's two figures with their unit: "6.85 h against 2.65 h"."""
    if c.figures is None:
        return ""
    unit = _UNITS[c.quantity][1]
    unit = f" {unit}" if unit else ""
    ours, theirs = c.figures
    return f"{num(ours, ',.4g')}{unit} against {num(theirs, ',.4g')}{unit}"


def verdict_text(c: ClaimCheck) -> str:
    """agrees / disagrees / not computed, with the reason in a phrase."""
    if c.trainfit is None:
        why = missing_text(c.missing) if c.missing else "no figure"
        also = reason_text(c)
        return f"not computed: {why}" + (f"; {also}" if also else "")
    if c.agrees:
        return "agrees" + (f" ({reason_text(c)})" if reason_text(c) else "")
    why = reason_text(c) or "no reason given"
    return f"DISAGREES: {why}"


def _numbers(c: ClaimCheck) -> str:
    """The claim's short name, setting, and document vs trainfit with the unit."""
    name, unit = _UNITS[c.quantity]
    if c.component:
        name = " + ".join(c.component)
    doc = f"{c.low:g}" if c.low == c.high else f"{c.low:g}-{c.high:g}"
    ours = "-" if c.trainfit is None else num(c.trainfit, ",.4g")
    if c.versus is not None:
        unit = _COMPARES[c.versus.compare]
    unit = f" {unit}" if unit else ""
    at = "" if c.setting is None else f" at {setting_text(c.setting, c.gpus)}"
    on = f" on {c.gpus} GPU" + ("s" if c.gpus > 1 else "") if c.gpus and not c.setting else ""
    other = f" {versus_text(c)}" if c.versus is not None else ""
    return f"{name}{at}{on}{other}: {doc} vs {ours}{unit}"


def _figure(c: ClaimCheck) -> str:
    return f"{_numbers(c)}, {verdict_text(c)}"


def _grouped(claims: list[ClaimCheck]) -> str:
    """The claims by verdict (and reason): "[agrees] a; b. [DISAGREES: why] c." """
    groups: dict[str, list[str]] = {}
    for c in claims:
        groups.setdefault(verdict_text(c), []).append(_numbers(c))
    return " ".join(f"[{verdict}] {'; '.join(items)}." for verdict, items in groups.items())


def _row_figures(d: DevicePlan, plan: Plan) -> tuple[str, str, str, str, str]:
    """fits, setting, memory, hours, cost of one stage's device plan."""
    s = d.setting
    if s is not None:
        local = local_cost(d)
        cost = "-" if local is None or local.total is None else f"{num(local.total)}"
        words = f"{s.precision.value}, {s.micro_batch} x {s.grad_accum}"
        words += ", checkpointing" if s.checkpointing else ""
        hours = amount(None if d.run is None else d.run.hours)
        return "yes", words, gib(s.needed_bytes), hours, cost
    many = d.distributed
    if many is None:
        return "no", "-", "-", "-", "-"
    run = multi_gpu_run(plan, many)
    words = f"{many.gpus} GPUs, {many.strategy.value}, {many.micro_batch} x {many.grad_accum}"
    return (
        f"no; {many.gpus} GPUs do",
        words,
        f"{gib(many.memory.total_bytes)} per GPU",
        "-" if run is None else amount(run[0]),
        "-" if run is None or not many.usd_per_hour else num(run[1]),
    )


def _stages_row(model: ModelSection, name: str) -> tuple[str, ...]:
    """A device's cells over a schedule's stages: the schedule's fits, peak, hours and local
    cost; each stage's setting (once where they are the same)."""
    cells = [
        _row_figures(d, stage.plan)
        for stage in model.stages
        for d in stage.plan.devices
        if d.device == name
    ]
    if len(cells) == 1:
        return cells[0]
    settings = list(dict.fromkeys(c[1] for c in cells))
    setting = (
        settings[0]
        if len(settings) == 1
        else "; ".join(f"stage {i}: {c[1]}" for i, c in enumerate(cells, 1))
    )
    sched = next((d for d in model.schedule if d.device == name), None)
    if sched is None:
        return ("; ".join(c[0] for c in cells), setting, *cells[-1][2:])
    local = next((v for option, v in sched.costs if option.startswith("local")), None)
    return (
        "yes" if sched.fits else "no",
        setting,
        gib(sched.peak_needed_bytes),
        amount(sched.hours),
        num(local),
    )


def _rows(model: ModelSection, claims: list[ClaimCheck]) -> list[tuple[str, ...]]:
    rows = []
    names = list(dict.fromkeys(d.device for s in model.stages for d in s.plan.devices))
    for name in names:
        mine = [
            c
            for c in claims
            if c.model == model.name and c.device == name and c.quantity not in DEVICE_LEVEL
        ]
        rows.append((model.name, name, *_stages_row(model, name), _grouped(mine) or "-"))
    return rows


def summary_blocks(report: Report) -> list[Block]:
    """The summary: a row per model and device, then the document's other figures."""
    claims = list(report.claims)
    rows = [r for m in report.models for r in _rows(m, claims)]
    placed = {(r[0], r[1]) for r in rows}
    others = [
        ("-" if c.quantity in DEVICE_LEVEL else c.model, c.device or "-", _figure(c))
        for c in claims
        if (c.model, c.device) not in placed or c.quantity in DEVICE_LEVEL
    ]
    counts = [c.agrees for c in claims]
    out = [
        _h(2, "Summary"),
        _p(
            f"The document's {len(claims)} figures against trainfit's: {counts.count(True)} "
            f"agree (within {TOLERANCE:.0%}), {counts.count(False)} disagree, "
            f"{counts.count(None)} not computed, each with the reason. Fits, setting, memory, "
            "hours and cost are "
            "trainfit's plan for the device (costs in USD); a figure the document gives at its "
            "own setting is computed at that setting."
            if claims
            else "Per model and device: whether it fits, the setting, memory, hours and cost."
        ),
        _t(
            (
                "model",
                "device",
                "fits",
                "setting",
                "memory",
                "hours",
                "cost",
                "the document's figures: document vs trainfit",
            ),
            rows,
        ),
    ]
    if others:
        header = ("model", "device or instance", "the document's figure: document vs trainfit")
        out.append(_t(header, others))
    return out
