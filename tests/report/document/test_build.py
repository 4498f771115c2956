"""`build_report`'s arguments checked, one line each; a live model's plan named by its class."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainfit.errors import SpecError, TrainfitError, UnknownNameError
from trainfit.report.document import to_markdown
from trainfit.report.document.build import ServingOnly, build_report, short_name
from trainfit.specfile.options import PlanOptions
from trainfit.specfile.run import run_plan

SERVED = ServingOnly(model="trainfit.models.zoo:emotion_mlp", parameters=10)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"plans": ["x"]},
            SpecError,
            "build_report: plans must be a Plan or StagedPlan or ServingOnly, got str: plan(...) "
            "or plan_stages(...) results, or ServingOnly(...)",
        ),
        (
            {"plans": [SERVED], "title": 3},
            SpecError,
            "build_report: title must be a str, got int: the report's title",
        ),
        (
            {"plans": [SERVED], "names": [3]},
            SpecError,
            "build_report: names must be a str, got int: one name per plan",
        ),
        (
            {"plans": [SERVED], "exports": ["zzz"]},
            UnknownNameError,
            "unknown export format 'zzz'; choose one of accelerate, deepspeed, hf, lightning, "
            "torchrun, yaml",
        ),
    ],
)
def test_a_wrong_argument_is_one_line(
    kwargs: dict[str, object], error: type[TrainfitError], message: str
) -> None:
    plans = kwargs.pop("plans")
    with pytest.raises(error) as raised:
        build_report(plans, **kwargs)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_one_plan_name_or_format_may_be_given_alone() -> None:
    report = build_report(SERVED, names="mlp", exports="HF")  # type: ignore[arg-type]
    assert [m.name for m in report.models] == ["mlp"]
    assert short_name(SERVED.model) == "emotion_mlp"


def test_a_live_model_s_plan_is_named_by_its_class() -> None:
    result = run_plan(
        PlanOptions(model=nn.Linear(8, 2), sample=torch.randn(2, 8), effective_batch=4)
    )
    assert result.plan is not None
    assert short_name(result.plan.spec.model) == "Linear"
    report = build_report([result.plan], exports=("hf",))
    assert (report.models[0].name, report.models[0].model) == ("Linear", "Linear (live module)")
    with pytest.raises(SpecError, match=r"^export 'torchrun' writes a training script"):
        build_report([result.plan], exports="torchrun")


def test_names_must_match_the_plans(planned) -> None:
    with pytest.raises(SpecError, match="2 names for 1 plans"):
        build_report([planned], names=["a", "b"])


def test_several_models_get_a_section_each_and_claims_name_theirs(planned) -> None:
    claim = {"what": "size of b", "model": "b", "quantity": "params_millions", "value": 33.5}
    report = build_report([planned, planned], names=["a", "b"], claims=[claim])
    md = to_markdown(report)
    assert "## a\n" in md and "## b\n" in md and md.count("### Quick comparison") == 2
    assert report.claims[0].model == "b" and report.claims[0].agrees
    assert "plots/a_memory.png" in md and "plots/b_memory.png" in md
    with pytest.raises(SpecError, match="claim 'size': name its model: one of a, b"):
        build_report(
            [planned, planned], names=["a", "b"], claims=[dict(claim, what="size", model=None)]
        )
    with pytest.raises(SpecError, match="two models share a name"):
        build_report([planned, planned], names=["a", "a"])
