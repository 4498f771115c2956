"""The tracer's set-up: an exception of the user's own code becomes one TraceError line with
its type, message and the user's frame, and FakeTensorMode's error log stays silent."""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainfit.errors import TraceError
from trainfit.estimator.step import estimate

USER_CODE = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(8, 8)

        def forward(self, x):
            assert x.shape[1] == 9, "width must be 9"
            return self.layer(x)


    class Fine(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(8, 8)

        def forward(self, x):
            return self.layer(x)


    def model():
        return Model()


    def fine():
        return Fine()


    def step(model, batch):
        return batch["labels"].sum()


    def wide():
        return nn.Sequential(nn.Linear(8, 2**24, bias=False))


    def loss(output, batch):
        return output[batch["nope"]].sum()


    def exits(output, batch):
        raise SystemExit(3)


    class Unprintable(Exception):
        def __str__(self):
            raise ValueError("no words")


    def unprintable(model, batch):
        raise Unprintable()
    """
)


@pytest.fixture(scope="module")
def user_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("user_code")
    path = folder / "user_code_for_trace.py"
    path.write_text(USER_CODE)
    sys.path.insert(0, str(folder))
    yield path
    sys.path.remove(str(folder))
    sys.modules.pop("user_code_for_trace", None)


def _line(path: Path, text: str) -> int:
    """The number of the last line holding `text`."""
    return max(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_failing_assert_in_the_forward_names_its_line(user_module: Path) -> None:
    with pytest.raises(TraceError) as raised:
        estimate(model="user_code_for_trace:model", inputs=("x=B,8",), batch=2)
    where = f"{user_module}:{_line(user_module, 'assert x.shape')}"
    assert f"AssertionError: width must be 9 (at {where})" in str(raised.value)
    assert "in module 'Model'" in str(raised.value)


def test_a_key_error_in_a_step_function_names_its_line(user_module: Path) -> None:
    with pytest.raises(TraceError) as raised:
        estimate(
            model="user_code_for_trace:fine",
            inputs=("x=B,8",),
            step_fn="user_code_for_trace:step",
        )
    where = f"{user_module}:{_line(user_module, 'labels')}"
    assert f"KeyError: 'labels' (at {where})" in str(raised.value)


def test_a_key_error_in_a_loss_names_its_line(user_module: Path) -> None:
    with pytest.raises(TraceError) as raised:
        estimate(
            model="user_code_for_trace:fine",
            inputs=("x=B,8",),
            loss="user_code_for_trace:loss",
        )
    where = f"{user_module}:{_line(user_module, 'nope')}"
    assert f"KeyError: 'nope' (at {where})" in str(raised.value)


def test_a_loss_that_calls_sys_exit_is_an_error_not_an_exit(user_module: Path) -> None:
    with pytest.raises(TraceError) as raised:
        estimate(
            model="user_code_for_trace:fine", inputs=("x=B,8",), loss="user_code_for_trace:exits"
        )
    where = f"{user_module}:{_line(user_module, 'raise SystemExit(3)')}"
    assert f"SystemExit: 3 (at {where})" in str(raised.value)


def test_an_exception_whose_message_fails_is_still_one_line(user_module: Path) -> None:
    with pytest.raises(TraceError) as raised:
        estimate(
            model="user_code_for_trace:fine",
            inputs=("x=B,8",),
            step_fn="user_code_for_trace:unprintable",
        )
    where = f"{user_module}:{_line(user_module, 'raise Unprintable()')}"
    assert f"Unprintable: (its message could not be rendered) (at {where})" in str(raised.value)


def test_an_op_that_fails_names_the_users_line(user_module: Path) -> None:
    with pytest.raises(TraceError) as raised:
        estimate(model="user_code_for_trace:fine", inputs=("x=B,7",))
    where = f"{user_module}:{_line(user_module, 'return self.layer(x)')}"
    assert str(raised.value).startswith("op aten.")
    assert str(raised.value).endswith(f"(at {where})")


def test_an_absurd_batch_logs_nothing_before_its_error(user_module: Path) -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    logger.addHandler(handler)
    try:
        with pytest.raises(TraceError, match="overflow"):
            estimate(model="user_code_for_trace:wide", inputs=("input=B,8",), batch=10**12)
    finally:
        logger.removeHandler(handler)
    assert records == []
