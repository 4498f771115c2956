"""`trainfit plan`: its output directories are written whole or not at all, and without
--effective-batch it is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainfit.cli.main import main

MLP = "trainfit.models.zoo:emotion_mlp"
OUTPUTS = ["--config-dir", "cfg", "--report", "rep", "--export", "hf", "--export-dir", "ex/sub"]


def test_a_failing_plan_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["plan", "trainfit.models.zoo:no_such_model", "--effective-batch", "8", *OUTPUTS]
    assert main(argv) == 1
    assert "no_such_model" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_writing_the_report_leaves_nothing_and_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import trainfit.report.document

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(trainfit.report.document, "plan_report", interrupted)
    monkeypatch.chdir(tmp_path)
    argv = ["plan", MLP, "--effective-batch", "64", "--device", "h100", "--jobs", "1", *OUTPUTS]
    assert main(argv) == 130
    assert "wrote" not in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_plan_that_succeeds_writes_every_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["plan", MLP, "--effective-batch", "64", "--device", "h100", "--jobs", "1", *OUTPUTS]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "wrote cfg/config_h100.yaml" in err and "wrote ex/sub/hf_h100.json" in err
    assert "wrote rep/report.html" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg", "ex", "rep"]
    assert (tmp_path / "ex/sub/hf_h100.json").is_file()
    assert not [p for p in tmp_path.rglob(".*trainfit-*")]


def test_generation_options_without_inference_are_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", MLP, "--effective-batch", "8", "--context", "128", "--infer-batch", "4"]
    assert main(argv) == 1
    assert capsys.readouterr().err == (
        "trainfit: error: --context, --infer-batch only apply with --inference: add "
        "--inference, or drop them\n"
    )


def test_plan_without_effective_batch_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", MLP]) == 1
    assert capsys.readouterr().err == (
        "trainfit: error: trainfit plan needs --effective-batch N (or --inference)\n"
    )
