"""Ctrl-C while the command line is still being imported exits 130 with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from trainfit.cli import launch


def test_an_interrupt_while_loading_is_one_line_and_130(monkeypatch, capsys) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "_load", interrupted)
    with pytest.raises(SystemExit) as exited:
        launch.entry()
    assert exited.value.code == 130
    assert capsys.readouterr().err == "trainfit: interrupted\n"


def test_the_loaded_command_runs(monkeypatch) -> None:
    ran = []
    monkeypatch.setattr(launch, "_load", lambda: lambda: ran.append(True))
    launch.entry()
    assert ran == [True]


# NB: a real Ctrl-C in a real process, in the middle of importing trainfit.cli.main: an import
# hook sends the signal when that import starts
_CHILD = """
import signal, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "trainfit.cli.main":
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
from trainfit.cli.launch import entry
entry()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGINT"), reason="POSIX signals")
def test_ctrl_c_during_the_import_of_the_cli_in_a_real_process() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, "models"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        # NB: Ctrl-C as a terminal gives it (a background job of a shell starts ignoring it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert (done.returncode, done.stderr) == (130, "trainfit: interrupted\n")
