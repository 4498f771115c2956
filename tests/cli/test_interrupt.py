"""Ctrl-C is never swallowed: not inside a finaliser, not by a worker process."""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import weakref
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from trainfit.cli import main as cli_main
from trainfit.cli.interrupt import (
    INTERRUPTED,
    in_import,
    interrupt_requested,
    interrupts_raised,
)
from trainfit.plan.worker_start import start_worker

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
    before, collecting = signal.getsignal(signal.SIGINT), gc.isenabled()
    try:
        start_worker()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
        if collecting:
            gc.enable()


def test_the_worker_starts_without_torch_and_without_the_collector() -> None:
    # NB: the initializer's module is imported when the worker process starts, before any
    # task's: it must not import torch, so that the collector is off for torch's import
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context, initializer=start_worker) as pool:
        assert pool.submit(gc.isenabled).result() is False
        assert pool.submit(_imported, "torch").result() is False


def _imported(name: str) -> bool:
    return name in sys.modules


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


def test_ctrl_c_inside_an_import_is_raised_after_it(tmp_path: Path) -> None:
    # NB: a library interrupted half-way through its import turns Ctrl-C into an ImportError
    # or a RecursionError later on; the interrupt waits for the import to finish
    (tmp_path / "slow_to_import.py").write_text(
        "import signal, time\n"
        "signal.raise_signal(signal.SIGINT)\n"
        "time.sleep(0.2)\n"
        "FINISHED = True\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with interrupts_raised(), pytest.raises(KeyboardInterrupt):
            import slow_to_import  # noqa: F401

            time.sleep(2)
        assert sys.modules["slow_to_import"].FINISHED
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("slow_to_import", None)


def test_an_import_is_seen_on_the_stack(tmp_path: Path) -> None:
    (tmp_path / "looks_at_its_stack.py").write_text(
        "import sys\nfrom trainfit.cli.interrupt import in_import\n"
        "SEEN = in_import(sys._getframe())\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import looks_at_its_stack

        assert looks_at_its_stack.SEEN
        assert not in_import(sys._getframe())
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("looks_at_its_stack", None)


def test_a_second_ctrl_c_is_raised_at_once(tmp_path: Path) -> None:
    (tmp_path / "pressed_twice.py").write_text(
        "import signal\n"
        "signal.raise_signal(signal.SIGINT)\n"
        "signal.raise_signal(signal.SIGINT)\n"
        "FINISHED = True\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with interrupts_raised(), pytest.raises(KeyboardInterrupt):
            import pressed_twice  # noqa: F401
        assert "pressed_twice" not in sys.modules
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("pressed_twice", None)


def test_a_library_failing_after_ctrl_c_is_the_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # NB: a library interrupted half-way fails with an error of its own; it is the interrupt
    (tmp_path / "fails_after_ctrl_c.py").write_text(
        "import signal\n"
        "signal.raise_signal(signal.SIGINT)\n"
        "raise ImportError('cannot import name x from partially initialized module y')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        cli_main, "_run", lambda args, argv: importlib.import_module("fails_after_ctrl_c")
    )
    assert cli_main.main(["devices"]) == INTERRUPTED
    assert capsys.readouterr().err == "trainfit: interrupted\n"
    sys.modules.pop("fails_after_ctrl_c", None)


def test_an_error_without_ctrl_c_is_not_the_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "just_fails.py").write_text("raise ImportError('broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli_main, "_run", lambda args, argv: importlib.import_module("just_fails"))
    with pytest.raises(ImportError, match="broken"):
        cli_main.main(["devices"])
    assert not interrupt_requested()


def test_an_interrupt_still_waiting_when_the_block_ends_is_raised_there(tmp_path: Path) -> None:
    (tmp_path / "ends_the_block.py").write_text(
        "import signal\nsignal.raise_signal(signal.SIGINT)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(KeyboardInterrupt), interrupts_raised():
            import ends_the_block  # noqa: F401
        assert "ends_the_block" in sys.modules
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ends_the_block", None)


def test_an_interrupt_inside_a_string_exec_still_exits_130(tmp_path: Path) -> None:
    # NB: CPython marks a KeyboardInterrupt that ends an `exec` of source text as unhandled
    # even once caught, and a `python -m` process then kills itself with SIGINT (status -2)
    # instead of exiting with its code; CI saw this once during a plan (a dataclass or
    # namedtuple being made runs such an `exec`)
    (tmp_path / "interrupted_in_exec.py").write_text(
        "import sys\n"
        "from trainfit.cli.interrupt import report_interrupt\n"
        "try:\n"
        "    exec('raise KeyboardInterrupt', {})\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(report_interrupt())\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_in_exec"], env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (INTERRUPTED, "trainfit: interrupted\n")
