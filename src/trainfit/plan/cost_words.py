"""A run's costs in words and as JSON: the one place a cost line's typed notes, a missed
deadline (`trainfit.timing.run`) and the recommendations become sentences."""

from __future__ import annotations

import math
from typing import Any

from trainfit.timing.run import (
    BoardPower,
    CostLine,
    CostNote,
    Missing,
    NoneInTime,
    NoSplit,
    OnlyUnpriced,
    Recommendation,
    RunEstimate,
)

_MISSING = {
    Missing.NO_ON_DEMAND_PRICE: "no on-demand price in the catalog",
    Missing.USER_PRICE: "on-demand price given by the user",
    Missing.NO_POWER: "no power figure in the catalog: give --watts",
    Missing.NO_PURCHASE_PRICE: "no purchase price in the catalog",
}


def cost_note_text(note: CostNote) -> str:
    """A note of a cost line, in words."""
    if isinstance(note, Missing):
        return _MISSING[note]
    if isinstance(note, NoSplit):
        return f"the effective batch does not split over its {note.gpus} GPUs"
    if isinstance(note, BoardPower):
        each = f"{note.gpus} x {note.watts:g} W" if note.gpus > 1 else f"{note.watts:g} W"
        return f"{each} board power (the GPU's rated power; the host adds more)"
    return f"purchase price in {note.currency} not converted: left out"


def cost_notes_text(line: CostLine) -> str:
    """A cost line's notes in one phrase ("" for none)."""
    return "; ".join(cost_note_text(n) for n in line.notes)


def cost_line_dict(line: CostLine) -> dict[str, Any]:
    """A cost line as JSON (money to the cent, its notes in words)."""

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 2)

    return {
        "option": line.option,
        "kind": line.kind,
        "hours": None if math.isnan(line.hours) else round(line.hours, 3),
        "on_demand": r(line.on_demand),
        "spot": r(line.spot),
        "electricity": r(line.electricity),
        "energy_kwh": r(line.energy_kwh),
        "amortisation": r(line.amortisation),
        "ownership": r(line.ownership),
        "total": r(line.total),
        "currency": line.currency,
        "note": cost_notes_text(line),
    }


def missed_text(rec: Recommendation) -> str:
    """Why no option is the cheapest by the deadline ("" when none was missed)."""
    missed = rec.missed
    if isinstance(missed, OnlyUnpriced):
        return (
            f"only options without a full price finish within {missed.deadline_hours:g} h: "
            + ", ".join(missed.options)
        )
    if isinstance(missed, NoneInTime):
        return (
            f"no option finishes within {missed.deadline_hours:g} h; the closest is "
            f"{missed.closest} at {missed.hours:.1f} h"
        )
    return ""


def recommendation_text(rec: Recommendation) -> str:
    """The recommendations in one or two lines."""
    note = missed_text(rec)
    return (
        f"cheapest: {rec.cheapest or '-'}; fastest: {rec.fastest or '-'}"
        + (
            f"; cheapest by the deadline: {rec.cheapest_by_deadline}"
            if rec.cheapest_by_deadline
            else ""
        )
        + (f"\n{note}" if note else "")
    )


def recommendation_dict(rec: Recommendation) -> dict[str, Any]:
    """The recommendations as JSON."""
    return {
        "cheapest": rec.cheapest,
        "fastest": rec.fastest,
        "cheapest_by_deadline": rec.cheapest_by_deadline,
        "note": missed_text(rec),
    }


def run_dict(totals: RunEstimate) -> dict[str, Any]:
    """A run on one device as JSON: its hours, costs and recommendations."""
    out: dict[str, Any] = {
        "hours": round(totals.time.hours, 3),
        "steps": totals.time.steps,
        "gpus": totals.time.gpus,
        "step_seconds": round(totals.time.step_seconds, 6),
        "communication_seconds": round(totals.time.communication_seconds, 6),
        "label": totals.time.label.value,
        "costs": [cost_line_dict(c) for c in totals.costs],
        "recommendation": recommendation_dict(totals.recommendation),
    }
    if totals.run.data_rate:
        out |= {
            "data_rate": totals.run.data_rate,
            "input_seconds": round(totals.time.input_seconds, 6),
            "input_bound": round(totals.time.input_bound, 3),
        }
    return out
