"""`trainfit doctor`: its exit codes and --json, --no-step."""

from __future__ import annotations

import argparse
import json

import pytest

from tests.measure.doctor_boxes import _h100_box, _mac
from trainfit.cli import doctor as doctor_command


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trainfit")
    doctor_command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["doctor", *argv])


def test_cli_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor_command.run(_args(), probe=_h100_box()) == 0
    assert "12 checks: 10 ok, 0 warnings, 0 failed, 2 skipped -> the stack works" in (
        capsys.readouterr().out
    )
    assert doctor_command.run(_args(), probe=_mac()) == 0  # warnings do not fail
    capsys.readouterr()
    broken = _h100_box(step_errors={"cuda:0": "CUDA error: unspecified launch failure"})
    assert doctor_command.run(_args("--json"), probe=broken) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False
    assert {c["name"]: c["status"] for c in data["checks"]}["step cuda:0"] == "fail"
    assert doctor_command.run(_args("--json", "--no-step"), probe=broken) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == []
