"""The report's opening summary and the words of typed reasons and missing figures."""

from __future__ import annotations

import pytest

from trainfit.plan.search import plan
from trainfit.report.document import QUANTITIES, build_report, to_html, to_markdown
from trainfit.report.document.model import (
    ClaimCheck,
    ClaimSetting,
    ClaimVersus,
    Missing,
    NoFigure,
    Report,
)
from trainfit.report.document.summary import (
    figures_text,
    missing_text,
    reason_text,
    summary_blocks,
    verdict_text,
    versus_text,
)
from trainfit.spec import TrainSpec
from trainfit.specfile.schema import ClaimReason
from trainfit.timing.run import RunSpec

MLP = "trainfit.models.zoo:emotion_mlp"


def _check(**fields: object) -> ClaimCheck:
    base = dict(what="x", model="m", device="d", quantity="hours", low=1.0, high=2.0,
                trainfit=None, ratio=None, agrees=None)  # fmt: skip
    return ClaimCheck(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize("reason", list(ClaimReason))
def test_every_reason_has_words(reason: ClaimReason) -> None:
    words = reason_text(_check(reason=reason.value, trainfit=5.0, agrees=False))
    assert words and "_" not in words


def test_verdicts_name_the_reason_or_why_there_is_no_figure() -> None:
    assumed = _check(trainfit=9.0, ratio=4.5, agrees=False, reason="dataset_assumed",
                     samples=22_000)  # fmt: skip
    assert verdict_text(assumed) == "DISAGREES: dataset size assumed as 22,000 samples"
    assert verdict_text(_check(trainfit=1.5, ratio=1.0, agrees=True)) == "agrees"
    assert verdict_text(_check(trainfit=9.0, agrees=False)) == "DISAGREES: no reason given"
    short = Missing(why=NoFigure.DOES_NOT_FIT, device="a100-40gb", needed_bytes=80 * 2**30,
                    usable_bytes=36 * 2**30)  # fmt: skip
    assert verdict_text(_check(missing=short)) == (
        "not computed: does not fit one a100-40gb: needs 80.00 GiB of 36.00 GiB usable"
    )
    assert verdict_text(_check(missing=short, reason="states_left_out")).endswith(
        "usable; the document leaves out fp32 gradients and optimizer state"
    )


@pytest.mark.parametrize("why", list(NoFigure))
def test_every_missing_figure_has_words(why: NoFigure) -> None:
    assert missing_text(Missing(why=why, device="t4", detail="the detail"))


def test_the_report_opens_with_a_row_per_model_and_device() -> None:
    result = plan(TrainSpec(model=MLP, device="h100"), 64, ("rtx-4060", "h100"), ladder=False,
                  run=RunSpec(samples=6_400))  # fmt: skip
    claims = [
        {"what": "hours", "device": "rtx-4060", "quantity": "hours", "value": 100,
         "reason": "data_loading", "source": "doc"},
        {"what": "size", "quantity": "params_millions", "value": 0.233, "source": "doc"},
    ]  # fmt: skip
    report = build_report([result], names=["mlp"], claims=claims)
    md = to_markdown(report)
    lines = md.splitlines()
    assert lines[2] == "## Summary"
    assert md.index("## Summary") < md.index("## Quick comparison")
    d = result.devices[0]
    row = next(line for line in lines if line.startswith("| mlp | rtx-4060 | yes |"))
    assert f"{d.setting.micro_batch} x {d.setting.grad_accum}" in row
    assert "hours: 100 vs" in row and "DISAGREES: data loading not included" in row
    assert any(line.startswith("| mlp | h100 | yes |") for line in lines)
    assert "| model | device or instance | the document's figure: document vs trainfit |" in md
    assert "| mlp | - | parameters: 0.233 vs " in md
    page = to_html(report)
    assert "<details><summary>Details: mlp</summary>" in page
    assert page.index("<h2>Summary</h2>") < page.index("<details>")
    assert "http://" not in page and "https://" not in page


@pytest.mark.parametrize("quantity", QUANTITIES)
def test_every_quantity_has_a_name_in_the_summary(quantity: str) -> None:
    check = _check(quantity=quantity, trainfit=5.0, ratio=1.0, agrees=True)
    blocks = summary_blocks(Report(title="t", models=(), claims=(check,)))
    ((_, device, figure),) = [r for b in blocks for r in b.rows]
    assert (device, figure.split(": ")[1].split(" vs ")[0]) == ("d", "1-2")
    assert "_" not in figure.split(": ")[0]  # NB: the quantity's name, not its key


def test_a_comparison_names_what_it_is_set_against_and_its_unit() -> None:
    versus = ClaimVersus(compare="times", device="rtx-4060",
                         setting=ClaimSetting(micro_batch=64, precision="fp16"))  # fmt: skip
    own = ClaimSetting(micro_batch=16, grad_accum=4, precision="fp32")
    check = _check(device="m4-pro-16gb", low=3.0, high=5.0, trainfit=2.5, ratio=0.83,
                   agrees=True, versus=versus, versus_device="rtx-4060", figures=(5.0, 2.0),
                   setting=own)  # fmt: skip
    assert versus_text(check) == "against rtx-4060 at micro-batch 64 x 1, fp16"
    assert figures_text(check) == "5 h against 2 h"
    (table,) = [b for b in summary_blocks(Report(title="t", models=(), claims=(check,)))
                if getattr(b, "rows", None)]  # fmt: skip
    (row,) = table.rows
    assert row[2] == (
        "hours at micro-batch 16 x 4, fp32 against rtx-4060 at micro-batch 64 x 1, fp16: "
        "3-5 vs 2.5 x, agrees"
    )
