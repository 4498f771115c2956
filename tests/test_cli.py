"""The CLI: the default example, JSON output, and one-line errors with exit code 1."""

from __future__ import annotations

import json

import pytest

from trainfit.cli.main import main


def test_default_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "device memory needed" in out
    assert "gpt2" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["estimate", "trainfit.models.zoo:emotion_mlp", "--batch", "32", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "h100"
    assert data["device_memory_needed_bytes"] > data["peak_reserved_bytes"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["estimate", "gpt3"], "unknown model 'gpt3'; did you mean 'gpt2'"),
        (["estimate", "gpt2", "--device", "h10"], "unknown device 'h10'"),
        (["estimate", "gpt2", "--optimizer", "lion"], "unknown optimizer 'lion'"),
        (["estimate", "x.y:z", "--input", "x=B,-1"], "dimension '-1' is neither B"),
        (["estimate", "gpt2", "--batch", "0"], "batch must be a positive integer, got 0"),
    ],
)
def test_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_max_batch(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "trainfit.models.zoo:melody_transformer", "--seq", "128"]
    code = main([*args, "--device", "rtx-4060", "--max-batch", "--margin", "0.1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("largest micro-batch that fits rtx-4060 keeping 10% free: ")
    assert " would need " in out
