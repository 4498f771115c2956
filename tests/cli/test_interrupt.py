"""Ctrl-C is never swallowed: not inside a finaliser, not by a worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest

from trainfit.cli.interrupt import interrupts_raised
from trainfit.plan.worker import ignore_interrupts

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX signals")


class _Owner:
    """Something with a finaliser."""


def test_ctrl_c_inside_a_finaliser_is_raised_after_it() -> None:
    finished = []

    def finaliser() -> None:
        signal.raise_signal(signal.SIGINT)  # NB: the handler runs here, inside the finaliser
        finished.append(True)

    with interrupts_raised():
        owner = _Owner()
        weakref.finalize(owner, finaliser)
        with pytest.raises(KeyboardInterrupt):
            del owner
            time.sleep(2)
    assert finished == [True]


def test_the_handlers_are_put_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    with interrupts_raised():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before


def test_the_worker_ignores_ctrl_c() -> None:
    before = signal.getsignal(signal.SIGINT)
    try:
        ignore_interrupts()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [2.0, 3.5, 5.0])
def test_ctrl_c_during_a_plan_exits_130_and_leaves_nothing(tmp_path: Path, delay: float) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    argv = ["plan", "gpt2", "--effective-batch", "8", "--seq", "128", "--report", "rep"]
    process = subprocess.Popen(
        [sys.executable, "-m", "trainfit", *argv, "--config-dir", "cfg"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # NB: Ctrl-C as a terminal gives it (a background job of a shell starts ignoring it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    if process.returncode == 0:
        pytest.skip(f"the plan finished within {delay} s")
    assert process.returncode == 130, err
    assert "Exception ignored" not in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
