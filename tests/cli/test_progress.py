"""The command line's progress line: shown on a terminal only, never with --json; each event
ends the parts inside the one it starts."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from trainfit.cli.main import main
from trainfit.cli.progress import StatusLine, shown, status
from trainfit.progress import Event, Part, tell


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_shown_on_a_terminal_only_and_never_for_json() -> None:
    assert shown(False, _Terminal())
    assert not shown(True, _Terminal())
    assert not shown(False, io.StringIO())


def test_a_new_part_ends_the_parts_inside_it() -> None:
    out = _Terminal()
    line = StatusLine(Console(file=out, force_terminal=True, width=80))
    line(Event(part=Part.DEVICE, name="h100", index=1, total=2))
    line(Event(part=Part.RUNG, name="bf16+adamw", index=1, total=3))
    line(Event(part=Part.TRACE, name="gpt2", batch=2))
    assert line.text == "h100 (device 1/2) · bf16+adamw (setting 1/3) · tracing at batch 2"
    line(Event(part=Part.DEVICE, name="t4", index=2, total=2))
    assert line.text == "t4 (device 2/2)"
    line.stop()
    line.say("report: plots")
    assert line.text == "t4 (device 2/2) · report: plots"
    line.stop()
    assert "t4 (device 2/2)" in out.getvalue()


def test_status_puts_the_line_in_effect_only_when_enabled() -> None:
    with status(False) as line:
        assert line is None
        tell(Part.DEVICE, "h100")
    with status(True) as line:
        assert line is not None
        tell(Part.DEVICE, "h100", index=1, total=1)
        assert line.text == "h100 (device 1/1)"


def test_json_and_a_pipe_print_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "trainfit.models.zoo:emotion_mlp", "--batch", "4", "--json"]) == 0
    assert capsys.readouterr().err == ""
