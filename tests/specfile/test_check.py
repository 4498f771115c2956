"""`trainfit.specfile.check`: a model that grew, one that no longer fits, one unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainfit.errors import SpecError
from trainfit.plan.options import Verdict
from trainfit.specfile.baseline import Baseline, read_baseline
from trainfit.specfile.check import (
    DEFAULT_TOLERANCE,
    NO_OUTPUTS,
    CheckResult,
    DeviceCheck,
    Outcome,
    check_plan_file,
    check_tolerance,
    compare,
    save_baseline,
)
from trainfit.specfile.loader import parse_plan_spec
from trainfit.specfile.run import PlanFileResult, run_plan_file

GIB = 2**30


def spec_text(factory: str, devices: str = "[rtx-4060]") -> str:
    return (
        "models:\n"
        "  - name: net\n"
        f"    model: tests.specfile.growing:{factory}\n"
        '    inputs: ["input=B,512:float32"]\n'
        "training:\n"
        "  effective_batch: 16\n"
        f"devices: {devices}\n"
    )


def planned(factory: str) -> PlanFileResult:
    return run_plan_file(parse_plan_spec(spec_text(factory)), NO_OUTPUTS)


@pytest.fixture(scope="module")
def small() -> PlanFileResult:
    return planned("small")


@pytest.fixture(scope="module")
def wide() -> PlanFileResult:
    return planned("wide")


@pytest.fixture
def small_baseline(small: PlanFileResult, tmp_path: Path) -> Baseline:
    path = tmp_path / "baseline.json"
    save_baseline(compare(small), path)
    return read_baseline(path)


def test_a_model_that_fits_passes_without_a_baseline(small: PlanFileResult) -> None:
    result = compare(small)
    (check,) = result.checks
    assert result.passed and result.baseline is None
    assert (check.model, check.device, check.outcome) == ("net", "rtx-4060", Outcome.FITS)
    assert check.verdict is Verdict.COMFORTABLE
    assert check.now is not None and check.now.micro_batch == 16
    # the plan keeps 10% of the card free: usable is 90% of its visible memory
    assert check.usable_bytes is not None and 6 * GIB < check.usable_bytes < 8 * GIB
    assert 0 < check.now.needed_bytes < check.usable_bytes
    assert check.growth is None


def test_the_same_model_passes_against_its_own_baseline(
    small: PlanFileResult, small_baseline: Baseline
) -> None:
    result = compare(small, baseline=small_baseline)
    (check,) = result.checks
    assert result.passed and check.outcome is Outcome.FITS
    assert check.growth == 0.0
    assert result.baseline == small_baseline.path
    assert result.versions_changed == ()


def test_a_wider_layer_fails_against_the_baseline(
    wide: PlanFileResult, small_baseline: Baseline
) -> None:
    result = compare(wide, baseline=small_baseline)
    (check,) = result.checks
    assert not result.passed and result.failed == (check,)
    assert check.outcome is Outcome.GREW
    assert check.now is not None and check.baseline is not None
    # 7.35M more parameters: fp32 weights, gradients and two AdamW moments, 16 bytes each
    extra = check.now.needed_bytes - check.baseline.needed_bytes
    assert extra >= 16 * 7_347_200 * 0.9
    assert check.growth is not None and check.growth > DEFAULT_TOLERANCE
    # still fits the card: the baseline catches the growth before an out-of-memory does
    assert check.verdict is Verdict.COMFORTABLE


def test_the_tolerance_decides_growth(wide: PlanFileResult, small_baseline: Baseline) -> None:
    growth = compare(wide, baseline=small_baseline).checks[0].growth
    assert growth is not None
    assert compare(wide, baseline=small_baseline, tolerance=growth * 1.01).passed
    assert not compare(wide, baseline=small_baseline, tolerance=growth * 0.99).passed


def test_the_smaller_model_against_the_wider_baseline_shrank_and_passes(
    small: PlanFileResult, wide: PlanFileResult, tmp_path: Path
) -> None:
    path = tmp_path / "wide.json"
    save_baseline(compare(wide), path)
    result = compare(small, baseline=read_baseline(path))
    assert result.passed and result.checks[0].outcome is Outcome.SHRANK


def test_a_pair_missing_from_the_baseline_fails(
    small: PlanFileResult, small_baseline: Baseline
) -> None:
    empty = dataclasses.replace(small_baseline, footprints={})
    result = compare(small, baseline=empty)
    assert not result.passed and result.checks[0].outcome is Outcome.NOT_IN_BASELINE


def test_another_setting_than_the_baseline_fails(
    small: PlanFileResult, small_baseline: Baseline
) -> None:
    ((key, footprint),) = small_baseline.footprints.items()
    halved = dataclasses.replace(footprint, micro_batch=8, grad_accum=2)
    result = compare(small, baseline=dataclasses.replace(small_baseline, footprints={key: halved}))
    assert result.checks[0].outcome is Outcome.SETTING_CHANGED and not result.passed


def test_changed_versions_are_listed(small: PlanFileResult, small_baseline: Baseline) -> None:
    older = dataclasses.replace(
        small_baseline, versions={**small_baseline.versions, "torch": "1.0.0"}
    )
    result = compare(small, baseline=older)
    assert [p for p, _, _ in result.versions_changed] == ["torch"]
    assert result.passed  # NB: said, never a failure


@pytest.mark.slow
def test_a_model_that_no_longer_fits_fails() -> None:
    result = check_plan_file(parse_plan_spec(spec_text("huge")))
    (check,) = result.checks
    assert check.outcome is Outcome.DOES_NOT_FIT and check.now is None
    assert check.verdict is Verdict.NO and not result.passed
    assert result.footprints() == {}


def test_a_baseline_is_not_written_when_a_model_does_not_fit(tmp_path: Path) -> None:
    short = DeviceCheck(
        model="net",
        device="rtx-4060",
        display="NVIDIA GeForce RTX 4060 8GB",
        verdict=Verdict.NO,
        usable_bytes=7 * GIB,
        now=None,
        baseline=None,
        outcome=Outcome.DOES_NOT_FIT,
    )
    result = CheckResult(source="spec.yaml", tolerance=0.02, baseline=None, checks=(short,))
    path = tmp_path / "b.json"
    with pytest.raises(SpecError, match=r"b.json not written: net on rtx-4060: does not fit"):
        save_baseline(result, path)
    assert not path.exists()


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2.0, float("nan")])
def test_a_bad_tolerance_is_refused(bad: float) -> None:
    with pytest.raises(SpecError, match=r"tolerance must be a fraction in \[0, 1\)"):
        check_tolerance(bad)
