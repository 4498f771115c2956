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


def test_every_problem_of_every_model_comes_before_any_is_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainfit.plan.search

    def not_planned(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was planned before the file's problems were raised")

    monkeypatch.setattr(trainfit.plan.search, "plan", not_planned)
    plan_file = _spec(
        f"""
        models:
          - {{name: good, model: "{MLP}"}}
          - {{name: bad, model: "trainfit.models.zoo:no_such_model", loss: "nosuchmod:fn"}}
          - {{name: lm, model: gpt2, loss: "{MLP}", offload: disk}}
        training: {{effective_batch: 16, strategy: zero9}}
        devices: [h100, h10]
        jobs: 1
        """,
        tmp_path,
    )
    with pytest.raises(SpecFileError) as raised:
        trainfit.run_plan_file(plan_file)
    problems = raised.value.problems
    assert len(problems) == 6, problems
    assert problems[0].startswith("spec.yaml:6: devices[1]: unknown device 'h10'")
    assert problems[1].startswith("spec.yaml: every model: unknown strategy 'zero9'")
    bad = "spec.yaml:3: models[1] (bad): "
    assert problems[2].startswith(f"{bad}module 'trainfit.models.zoo' has no attribute")
    assert problems[3].startswith(f"{bad}cannot import module 'nosuchmod' for loss function")
    lm = "spec.yaml:4: models[2] (lm): "
    assert problems[4].startswith(f"{lm}unknown offload 'disk'")
    assert problems[5].startswith(f"{lm}--loss {MLP} is for a plain module: gpt2 (catalog)")


def test_structure_and_value_problems_come_in_one_round(tmp_path: Path) -> None:
    from trainfit.specfile.run import load_checked

    spec = textwrap.dedent(
        """
        models:
          - {name: good, model: "trainfit.models.zoo:emotion_mlp", seq: long}
          - {name: bad, model: "trainfit.models.zoo:no_such_model"}
        training: {efective_batch: 16, effective_batch: sixteen, optimizer: lion}
        devices: [h100, h10]
        jobs: 1
        """
    ).lstrip("\n")
    (tmp_path / "spec.yaml").write_text(spec)
    with pytest.raises(SpecFileError) as raised:
        load_checked(tmp_path / "spec.yaml")
    source = str(tmp_path / "spec.yaml")
    problems = [p.removeprefix(source) for p in raised.value.problems]
    assert problems == [
        ":2: models[0].seq: expected a whole number, got 'long'",
        ":3: models[1] (bad): module 'trainfit.models.zoo' has no attribute 'no_such_model' "
        "(model factory 'trainfit.models.zoo:no_such_model')",
        ":4: unknown field 'efective_batch' in training (did you mean 'effective_batch'?)",
        ":4: training.effective_batch: expected a whole number, got 'sixteen'",
        ":4: training.optimizer: unknown optimizer 'lion'; choose one of adafactor, adam, "
        "adamw, adamw-8bit, sgd, sgd-momentum",
        ":5: devices[1]: unknown device 'h10'; did you mean 'h100', 'a10', 'h200'? "
        "(run `trainfit devices` for the list)",
    ]  # NB: and not "no effective batch", the field left out for its own problem


def test_run_plan_needs_an_effective_batch() -> None:
    with pytest.raises(trainfit.SpecError, match="needs --effective-batch"):
        run_plan(PlanOptions(model=MLP, device=("h100",)))


def test_a_task_on_a_plain_module_is_a_problem_of_the_first_round(tmp_path: Path) -> None:
    plan_file = _spec(
        f"""
        models:
          - {{name: mlp, model: "{MLP}", task: causal-lm}}
        training: {{effective_batch: 16}}
        devices: [h100, h10]
        jobs: 1
        """,
        tmp_path,
    )
    with pytest.raises(SpecFileError) as raised:
        trainfit.run_plan_file(plan_file)
    assert raised.value.problems[1] == (
        f"spec.yaml:2: models[0] (mlp): --task causal-lm is for a transformers model: {MLP} "
        "(import path) is a plain module, whose output is what it returns; drop --task (give "
        "--loss or --step-fn for another loss)"
    )


def test_a_single_device_without_a_list_is_reported_with_its_line(tmp_path: Path) -> None:
    plan_file = _spec(
        f"""
        model: "{MLP}"
        training: {{effective_batch: 16}}
        devices: h10
        """,
        tmp_path,
    )
    with pytest.raises(SpecFileError) as raised:
        trainfit.run_plan_file(plan_file)
    assert raised.value.problems[0].startswith("spec.yaml:3: devices[0]: unknown device 'h10'")
