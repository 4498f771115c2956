"""Every terminal table stays readable at 80 and 120 columns: drawn as a table where it fits
without cutting a word, stacked row by row where it does not; never a word cut ("…")."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console, RenderableType
from rich.text import Text

from trainfit import estimate
from trainfit.hardware.catalog import devices
from trainfit.plan.options import Plan
from trainfit.plan.search import plan
from trainfit.plan.time_words import time_note_text
from trainfit.report.catalog import devices_table
from trainfit.report.plan import plan_renderable
from trainfit.report.tables import FitTable
from trainfit.report.terminal import estimate_renderable, time_renderable
from trainfit.spec import TrainSpec
from trainfit.timing.run import RunSpec

WIDTHS = (80, 120)


def _render(renderable: RenderableType, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def _verdicts() -> FitTable:
    table = FitTable(title="per device")
    for column in ("device", "verdict", "precision", "micro x accum", "memory", "changes / why"):
        table.add_column(column)
    table.add_row(
        "rtx-4060", Text("fits with the listed changes", style="yellow"), "bf16", "4 x 16",
        "5.54 GiB", "micro-batch 4 x 16 accumulation steps",
    )  # fmt: skip
    table.add_row("h100", "fits comfortably", "bf16", "64 x 1", "47.78 GiB", "")
    return table


def test_a_table_that_fits_is_drawn_as_one() -> None:
    text = _render(_verdicts(), 120)
    assert "┃ device   ┃ verdict" in text
    assert "…" not in text


def test_a_table_too_wide_stacks_its_rows() -> None:
    lines = [line.rstrip() for line in _render(_verdicts(), 80).splitlines()]
    assert lines == [
        "per device",
        "rtx-4060",
        "  verdict        fits with the listed changes",
        "  precision      bf16",
        "  micro x accum  4 x 16",
        "  memory         5.54 GiB",
        "  changes / why  micro-batch 4 x 16 accumulation steps",
        "h100",
        "  verdict        fits comfortably",
        "  precision      bf16",
        "  micro x accum  64 x 1",
        "  memory         47.78 GiB",
    ]


def test_a_long_word_folds_instead_of_being_cut() -> None:
    table = FitTable()
    table.add_column("name")
    table.add_column("source")
    table.add_row("gpt2", "https://huggingface.co/openai-community/gpt2/blob/main/config.json")
    text = _render(table, 60)
    assert "…" not in text
    assert "config.j" in text and "son" in text


@pytest.fixture(scope="module")
def timed_plan() -> Plan:
    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    return plan(spec, 100_000, ("h100", "rtx-4060"), run=RunSpec(samples=10**7))


@pytest.mark.parametrize("width", WIDTHS)
def test_the_plan_never_cuts_a_verdict(timed_plan: Plan, width: int) -> None:
    text = _render(plan_renderable(timed_plan), width)
    assert "…" not in text
    lines = text.splitlines()
    for d in timed_plan.devices:
        assert any(d.verdict.value in line for line in lines), (d.device, text)
    assert max(len(line.rstrip()) for line in lines) <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_the_estimate_and_the_catalog_fit(width: int) -> None:
    result = estimate(TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=8))
    for renderable in (
        estimate_renderable(result),
        time_renderable(result, None),
        devices_table(devices().values()),
    ):
        text = _render(renderable, width)
        assert "…" not in text
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width


def test_the_plan_says_what_each_step_time_can_be_trusted_to(timed_plan: Plan) -> None:
    text = " ".join(_render(plan_renderable(timed_plan), 400).split())
    for d in timed_plan.devices:
        assert d.step_time is not None and d.step_time.notes, d.device
        for note in d.step_time.notes:
            assert text.count(f"{d.device}: {time_note_text(note)}") == 1, (d.device, text)
    assert "checked blind" in text
    # NB: a run over several GPUs times a data-parallel step, which no blind set ran
    over_8 = dataclasses.replace(timed_plan, run=dataclasses.replace(timed_plan.run, gpus=8))
    assert "checked blind" not in _render(plan_renderable(over_8), 400)
