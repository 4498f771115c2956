"""`trainfit measure` shows what it is doing on a terminal: the estimate, the build, each step
before it runs (the line removed before each step's own line is printed), each attempt of the
max-batch search; nothing with --json."""

from __future__ import annotations

import sys

import pytest

from trainfit.cli import progress
from trainfit.cli.main import main
from trainfit.progress import Event

BASE = ["measure", "tests.measure_models:capped_mlp", "--input", "x=B,16:float32", "--on", "cpu"]


class _Line:
    """A status line that writes what it is told, in order, into stderr."""

    def __call__(self, event: Event, /) -> None:
        print(f"<{event.part.value} {event.name}>", file=sys.stderr)

    def say(self, text: str) -> None:
        print(f"<say {text}>", file=sys.stderr)

    def stop(self) -> None:
        print("<stop>", file=sys.stderr)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "shown", lambda json=False, stream=None: not json)
    monkeypatch.setattr(progress, "StatusLine", _Line)


def test_steps_show_the_estimate_the_build_and_each_step(terminal, capsys) -> None:
    assert main([*BASE, "--batch", "4", "--steps", "2", "--warmup", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    told = [line for line in err if line.startswith("<measure")]
    assert told[:2] == ["<measure import>", "<measure estimate>"]
    assert told[2:] == ["<measure build>", "<measure warmup>", "<measure step>",
                        "<measure step>", "<measure loop>"]  # fmt: skip
    assert "<trace" in "".join(err[: err.index("<measure build>")])
    steps = [i for i, line in enumerate(err) if line.startswith("step ")]
    assert len(steps) == 3 and all(err[i - 1] == "<stop>" for i in steps)
    loop = [i for i, line in enumerate(err) if line.startswith("2 steps back to back: ")]
    assert len(loop) == 1 and loop[0] > steps[-1] and err[loop[0] - 1] == "<stop>"


def test_the_max_batch_search_shows_each_attempt(terminal, capsys) -> None:
    assert main([*BASE, "--max-batch", "--limit", "4", "--no-eval", "--no-estimate"]) == 0
    err = capsys.readouterr().err
    assert "<measure build>" in err and "<measure attempt>" in err
    assert err.rstrip().endswith("<stop>")


def test_json_shows_nothing(terminal, capsys) -> None:
    assert main([*BASE, "--batch", "4", "--steps", "1", "--warmup", "1", "--json"]) == 0
    assert "<" not in capsys.readouterr().err
