"""A user's module or factory that fails is one line: its type, its message, where."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainfit.errors import ModelLoadError
from trainfit.models.imports import resolve
from trainfit.models.source import build_program
from trainfit.spec import TrainSpec


def test_a_module_with_a_syntax_error_names_its_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_syntax_mod.py").write_text("def ok(:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelLoadError) as raised:
        resolve("broken_syntax_mod:ok", "model factory")
    message = str(raised.value)
    assert "SyntaxError: invalid syntax (broken_syntax_mod.py, line 1)" in message
    assert "<frozen" not in message


def test_a_factory_that_calls_sys_exit_is_an_error_not_an_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "exiting_factory_mod.py").write_text("def make():\n    raise SystemExit(4)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ModelLoadError, match=r"exiting_factory_mod:make failed: SystemExit: 4 \(at "
    ):
        build_program(TrainSpec(model="exiting_factory_mod:make", inputs=("x=B,8",)), "meta")


def test_a_forgotten_live_model_s_path_names_its_class_and_the_way_out() -> None:
    import gc

    import torch
    from torch import nn

    from trainfit.models.live import registered

    with registered(nn.Linear(4, 2), torch.randn(3, 4)) as live:
        path = live.model_path
    del live
    gc.collect()
    with pytest.raises(
        ModelLoadError,
        match=r"^the model factory of Linear \(live module\) is gone: a live model's import path "
        r"resolves only while .*; pass the module again, "
        r"e\.g\. estimate\(model=net, sample=batch\)$",
    ):
        resolve(path, "model factory")
