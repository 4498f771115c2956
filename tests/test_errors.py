"""The public functions check their arguments' types: a wrong one is one SpecError line naming
the function, the argument and how to make the right one, not an AttributeError inside."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import trainfit
from trainfit.errors import SpecError, check_argument


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: trainfit.run_plan("gpt2"),
            "run_plan: options must be a PlanOptions, got str: run_plan(PlanOptions(model=...))",
        ),
        (
            lambda: trainfit.run_plan_file("spec.yaml"),
            "run_plan_file: plan_file must be a PlanFile, got str: load it with "
            "load_plan_spec(path)",
        ),
        (
            lambda: trainfit.load_plan_spec(3),
            "load_plan_spec: path must be a str or PathLike, got int: the spec file's path",
        ),
        (
            lambda: trainfit.find_max_batch("gpt2"),
            "find_max_batch: spec must be a TrainSpec, got str",
        ),
        (
            lambda: trainfit.estimate_forward("gpt2"),
            "estimate_forward: spec must be a TrainSpec, got str",
        ),
        (
            lambda: trainfit.plan_distributed("gpt2", 8, "h100"),
            "plan_distributed: spec must be a TrainSpec, got str",
        ),
        (
            lambda: trainfit.estimate_serving("gpt2", devices="h100", precisions="bf16", batches=1),
            "estimate_serving: spec must be a TrainSpec, got str",
        ),
        (
            lambda: trainfit.estimate_inference(3, context=8, new_tokens=8),
            "estimate_inference: model must be a str or Module, got int",
        ),
        (
            lambda: trainfit.plan_stages("gpt2", [], 8, "h100"),
            "plan_stages: spec must be a TrainSpec, got str",
        ),
        (
            lambda: trainfit.measure_latency("gpt2"),
            "measure_latency: spec must be a TrainSpec, got str",
        ),
        (
            lambda: trainfit.plan_report(["gpt2"]),
            "plan_report: models must be a PlanResult, got str: a list of run_plan's results",
        ),
        (
            lambda: trainfit.write_report("report", "out"),
            "write_report: report must be a Report, got str: build it with plan_report(...)",
        ),
        (
            lambda: trainfit.estimate_run("x", "y"),
            "estimate_run: result must be an Estimate, got str: make one with "
            "estimate(model=..., device=...)",
        ),
        (
            lambda: trainfit.find_max_batch(model=3),
            "model must be a catalog name, a directory or pkg.module:factory (str), got int",
        ),
        (
            lambda: trainfit.max_micro_batch(trainfit.TrainSpec(model="gpt2"), margin="0.1"),
            "margin must be a fraction in [0, 1), got '0.1'",
        ),
    ],
)
def test_a_wrong_argument_type_is_one_line(call: Callable[[], object], message: str) -> None:
    with pytest.raises(SpecError) as raised:
        call()
    assert str(raised.value).startswith(message)


def test_a_bool_is_not_a_number() -> None:
    check_argument("f", "n", 3, int, "a count")
    with pytest.raises(SpecError, match=r"^f: n must be an int, got bool: a count$"):
        check_argument("f", "n", True, int, "a count")
