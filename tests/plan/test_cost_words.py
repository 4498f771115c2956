"""A run's costs in words and as JSON (exact strings)."""

from __future__ import annotations

import math

from trainfit.plan.cost_words import (
    cost_line_dict,
    cost_note_text,
    cost_notes_text,
    recommendation_dict,
    recommendation_text,
)
from trainfit.timing.run import (
    BoardPower,
    CostLine,
    Missing,
    NoneInTime,
    NoSplit,
    OnlyUnpriced,
    Recommendation,
    UnconvertedPrice,
)


def test_each_cost_note_in_words() -> None:
    assert cost_note_text(NoSplit(gpus=8)) == "the effective batch does not split over its 8 GPUs"
    assert cost_note_text(BoardPower(gpus=1, watts=115)) == (
        "115 W board power (the GPU's rated power; the host adds more)"
    )
    assert cost_note_text(BoardPower(gpus=2, watts=700.0)) == (
        "2 x 700 W board power (the GPU's rated power; the host adds more)"
    )
    assert cost_note_text(UnconvertedPrice(currency="EUR")) == (
        "purchase price in EUR not converted: left out"
    )
    assert cost_note_text(Missing.NO_ON_DEMAND_PRICE) == "no on-demand price in the catalog"
    assert cost_note_text(Missing.USER_PRICE) == "on-demand price given by the user"
    assert cost_note_text(Missing.NO_POWER) == "no power figure in the catalog: give --watts"
    assert cost_note_text(Missing.NO_PURCHASE_PRICE) == "no purchase price in the catalog"


def test_a_cost_line_as_json_joins_its_notes() -> None:
    line = CostLine(
        option="local m3-max",
        kind="local",
        hours=math.nan,
        electricity=0.123,
        notes=(Missing.NO_POWER, Missing.NO_PURCHASE_PRICE),
    )
    assert cost_notes_text(line) == (
        "no power figure in the catalog: give --watts; no purchase price in the catalog"
    )
    data = cost_line_dict(line)
    assert (data["hours"], data["electricity"], data["total"]) == (None, 0.12, 0.12)
    assert data["note"] == cost_notes_text(line)
    assert cost_notes_text(CostLine(option="x", kind="cloud", hours=1.0)) == ""


def test_recommendations_and_a_missed_deadline_in_words() -> None:
    met = Recommendation(cheapest="slow", fastest="fast", cheapest_by_deadline="fast")
    assert recommendation_text(met) == (
        "cheapest: slow; fastest: fast; cheapest by the deadline: fast"
    )
    assert recommendation_dict(met)["note"] == ""
    late = Recommendation(
        cheapest="slow",
        fastest=None,
        cheapest_by_deadline=None,
        missed=NoneInTime(deadline_hours=0.5, closest="fast", hours=1.04),
    )
    assert recommendation_text(late) == (
        "cheapest: slow; fastest: -\nno option finishes within 0.5 h; the closest is fast at 1.0 h"
    )
    unpriced = Recommendation(
        cheapest=None,
        fastest="a",
        cheapest_by_deadline=None,
        missed=OnlyUnpriced(deadline_hours=2.0, options=("local m3-max", "b")),
    )
    assert recommendation_dict(unpriced) == {
        "cheapest": None,
        "fastest": "a",
        "cheapest_by_deadline": None,
        "note": "only options without a full price finish within 2 h: local m3-max, b",
    }
