"""`trainfit.export.formats`: the format names and the packages each needs (a missing one is
one line, from the library and from `trainfit plan --export`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.export.support import MLP
from trainfit.cli.main import main
from trainfit.errors import TrainfitError, UnknownNameError
from trainfit.export.formats import export_name, require_packages


def test_unknown_format() -> None:
    with pytest.raises(UnknownNameError, match="unknown export format 'megatron'"):
        export_name("megatron", "h100")


@pytest.mark.parametrize(
    ("fmt", "modules", "line"),
    [
        (
            "lightning",
            ("lightning", "pytorch_lightning"),
            "needs lightning, which is not installed: pip install lightning",
        ),
        (
            "hf",
            ("accelerate",),
            "needs accelerate, which is not installed: pip install transformers accelerate",
        ),
        (
            "accelerate",
            ("accelerate",),
            "needs accelerate, which is not installed: pip install accelerate",
        ),
    ],
)
def test_a_missing_package_is_one_line(
    fmt: str,
    modules: tuple[str, ...],
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(TrainfitError, match=line):
        require_packages([fmt])
    args = ["plan", MLP, "--effective-batch", "64", "--device", "cpu", "--export", fmt]
    assert main([*args, "--export-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"trainfit: error: the {fmt} export {line}\n"
    assert captured.out == ""  # NB: refused before planning
    assert list(tmp_path.iterdir()) == []


def test_yaml_needs_nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("lightning", "pytorch_lightning", "transformers", "accelerate"):
        monkeypatch.setitem(sys.modules, module, None)
    require_packages(["yaml"])
