"""`trainfit plan spec.yaml`: the file is the command line's plan, typed options override it,
several models get one plan each, training and inference are reported together, each problem
is printed on its line; the models' files and the report are written whole or not at all."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.specfile.plan_files import FULL, FULL_ARGV, MLP, _resolved, _write
from trainfit.cli.main import main


def test_a_spec_with_a_good_and_a_bad_model_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = textwrap.dedent(
        """
        models:
          - {name: good, model: "trainfit.models.zoo:emotion_mlp"}
          - {name: bad, model: "trainfit.models.zoo:no_such_model"}
        training: {effective_batch: 16}
        devices: [h100]
        jobs: 1
        outputs: {config_dir: cfg, report: rep}
        """
    )
    (tmp_path / "spec.yaml").write_text(spec)
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "spec.yaml"]) == 1
    err = capsys.readouterr().err
    assert "no_such_model" in err and "wrote" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["spec.yaml"]


@pytest.mark.slow
def test_full_file_is_the_command_line_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, FULL)
    assert main(["plan", str(path)]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["plan", *FULL_ARGV]) == 0
    from_argv = json.loads(capsys.readouterr().out)
    assert from_file == from_argv
    assert [d["device"] for d in from_file["devices"]] == ["h100", "a100-80gb"]
    assert from_file["effective_batch"] == 64


@pytest.mark.slow
def test_override_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, FULL)
    typed = ["--device", "rtx-4060", "--measured-on", "rtx-4060", "--effective-batch", "32"]
    assert main(["plan", str(path), *typed]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["device"] for d in out["devices"]] == ["rtx-4060"]
    assert out["effective_batch"] == 32


@pytest.mark.slow
def test_several_models_one_plan_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(
        tmp_path,
        f"""
        models:
          - {{name: small, model: "{MLP}"}}
          - name: large
            model: {MLP}
            effective_batch: 16
            training: {{optimizer: sgd}}
        training: {{effective_batch: 64}}
        devices: [h100]
        jobs: 1
        """,
    )
    small, large = _resolved(path)
    assert (small.effective_batch, small.optimizer) == (64, "adamw")
    assert (large.effective_batch, large.optimizer) == (16, "sgd")
    assert main(["plan", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["small", "large"]
    assert out["small"]["effective_batch"] == 64
    assert out["large"]["effective_batch"] == 16
    assert main(["plan", str(path)]) == 0
    text = capsys.readouterr().out
    assert text.index("model small") < text.index("model large")


def test_no_effective_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, f"model: {MLP}\n")
    assert main(["plan", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"trainfit: error: {path}:1: models[0] ({MLP}): no effective batch: "
        "add training.effective_batch (or effective_batch in the model entry)\n"
    )


@pytest.mark.slow
def test_a_models_error_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "models:\n  - gpt2\n  - gpt3\ntraining: {effective_batch: 8}\n")
    assert len(_resolved(path)) == 2  # NB: a model's name is checked when it is planned
    assert main(["plan", str(path), "--json", "--device", "h100"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"trainfit: error: {path}:3: models[1] (gpt3): unknown model 'gpt3'")
    assert err.count("\n") == 1


def test_cli_prints_each_problem_on_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "model: gpt2\nseq: 5\ntraining: {epochs: x}\n")
    assert main(["plan", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"trainfit: error: {path}: 3 problems",
        f"  {path}:1: models[0] (gpt2): no effective batch: add training.effective_batch (or "
        "effective_batch in the model entry)",
        f"  {path}:2: 'seq' is a field of a model, not of the file's top level: write "
        "'model: {model: ..., seq: ...}', or give it in an item of 'models:'",
        f"  {path}:3: training.epochs: expected a number, got 'x'",
    ]


def test_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nope.yml"
    assert main(["plan", str(path)]) == 1
    assert capsys.readouterr().err == f"trainfit: error: {path}: spec file not found\n"


@pytest.mark.slow
def test_spec_file_with_training_and_inference_reports_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path,
        f"""
        models:
          - {{name: a, model: {MLP}}}
          - {{name: b, model: {MLP}, devices: [h100]}}
        data: {{samples: 1000}}
        training: {{effective_batch: 8}}
        devices: [rtx-4060]
        jobs: 1
        inference: {{precision: [fp32], batch: [1]}}
        outputs: {{report: rep}}
        claims:
          - {{what: latency b, model: b, device: h100, quantity: latency_ms, value: 1}}
        """,
    )
    assert main(["plan", str(path)]) == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    a, b = data["models"]
    assert [r["device"] for r in a["inference"]] == ["rtx-4060"]
    assert [r["device"] for r in b["inference"]] == ["h100"]
    assert [d["device"] for d in b["stages"][0]["plan"]["devices"]] == ["h100"]
    (claim,) = data["claims"]
    assert claim["trainfit"] == b["inference"][0]["total_ms"]
