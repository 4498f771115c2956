"""`trainfit.run_plan_file`: a loaded spec file planned with typed values, typed results."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import trainfit
from trainfit.errors import SpecFileError
from trainfit.plan.options import Plan
from trainfit.plan.stages import StagedPlan
from trainfit.specfile import (
    FilesWritten,
    PlanFileResult,
    PlanOptions,
    parse_plan_spec,
    run_plan,
)

MLP = "trainfit.models.zoo:emotion_mlp"


def _spec(text: str, directory: Path) -> trainfit.PlanFile:
    return parse_plan_spec(textwrap.dedent(text).lstrip("\n"), "spec.yaml", directory)


def test_each_model_is_planned_with_its_files(tmp_path: Path) -> None:
    plan_file = _spec(
        f"""
        models:
          - {{name: small, model: "{MLP}"}}
          - {{name: staged, model: "{MLP}", stages: [{{epochs: 1}}, {{epochs: 2}}]}}
        data: {{samples: 1000}}
        training: {{effective_batch: 16}}
        devices: [rtx-4060]
        jobs: 1
        outputs: {{config_dir: configs}}
        """,
        tmp_path,
    )
    result = trainfit.run_plan_file(plan_file)
    assert isinstance(result, PlanFileResult) and result.plan_file is plan_file
    small, staged = result.models
    assert (small.name, staged.name) == ("small", "staged")
    assert isinstance(small.plan, Plan) and small.plan.effective_batch == 16
    assert [d.device for d in small.plan.devices] == ["rtx-4060"]
    assert isinstance(staged.plan, StagedPlan) and len(staged.plan.stages) == 2
    (written,) = small.files
    assert written.configs == (tmp_path / "configs/small/config_rtx-4060.yaml",)
    assert written.exported is None
    assert [f.configs for f in staged.files] == [
        (tmp_path / f"configs/staged/stage{n}/config_rtx-4060.yaml",) for n in (1, 2)
    ]
    assert all(path.is_file() for f in (*small.files, *staged.files) for path in f.configs)


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    plan_file = _spec(
        f"""
        model: {MLP}
        training: {{effective_batch: 16}}
        devices: [h100]
        jobs: 1
        """,
        tmp_path,
    )
    (model,) = trainfit.run_plan_file(plan_file, {"effective_batch": 8}).models
    assert model.options.effective_batch == 8
    assert isinstance(model.plan, Plan) and model.plan.effective_batch == 8
    assert model.name == MLP and model.files == (FilesWritten(configs=(), exported=None),)


def test_serving_only_gives_the_serving_estimates(tmp_path: Path) -> None:
    plan_file = _spec(
        f"""
        model: {MLP}
        devices: [rtx-4060]
        inference: {{precision: [fp32], batch: [1, 4]}}
        """,
        tmp_path,
    )
    (model,) = trainfit.run_plan_file(plan_file).models
    assert model.plan is None and model.generation == ()
    assert [(s.batch, s.device.name) for s in model.serving] == [  # type: ignore[union-attr]
        (1, "rtx-4060"),
        (4, "rtx-4060"),
    ]


def test_a_models_error_names_its_line(tmp_path: Path) -> None:
    plan_file = _spec(
        """
        model: {name: bad, model: "trainfit.models.zoo:no_such_model"}
        training: {effective_batch: 8}
        devices: [h100]
        jobs: 1
        """,
        tmp_path,
    )
    with pytest.raises(SpecFileError, match=r"spec.yaml:1: models\[0\] \(bad\): "):
        trainfit.run_plan_file(plan_file)


def test_run_plan_needs_an_effective_batch() -> None:
    with pytest.raises(trainfit.SpecError, match="needs --effective-batch"):
        run_plan(PlanOptions(model=MLP, device=("h100",)))
