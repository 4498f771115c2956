"""The CLI: the default example, JSON output, and one-line errors with exit code 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
        (["estimate", "gpt2", "--margin", "0.1"], "--margin 0.1 applies to --max-batch only"),
        (
            ["estimate", "gpt2", "--loss", "nosuchmod:fn"],
            "--loss nosuchmod:fn is for a plain module: gpt2 (catalog) is a transformers model",
        ),
        (
            ["estimate", "gpt2", "--task", "text-classification"],
            "unknown task 'text-classification'",
        ),
        (["estimate", "gpt2", "--task", "multiple-choice"], "no multiple-choice class for model"),
        (
            ["estimate", "gpt2", "--optimizer", "adafactor", "--optimizer-path", "fused"],
            "Adafactor has no fused implementation",
        ),
        (
            ["estimate", "trainfit.models.zoo:emotion_mlp", "--task", "causal-lm"],
            "--task causal-lm is for a transformers model: trainfit.models.zoo:emotion_mlp "
            "(import path) is a plain module",
        ),
        (
            ["estimate", "gpt2", "--input", "x=B,3"],
            "--input is for a plain module: gpt2 (catalog) is a transformers model",
        ),
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


def test_the_class_built_and_the_optimizer_path_are_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["estimate", "gpt2", "--batch", "1", "--seq", "32", "--task"]
    assert main([*argv, "AutoModelForTokenClassification", "--optimizer-path", "fused"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "built as GPT2ForTokenClassification (token-classification), from the task given" in out
    assert main([*argv, "sequence-classification", "--optimizer-path", "fused", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model_class"]["name"] == "GPT2ForSequenceClassification"
    assert data["spec"]["optimizer_path"] == "fused"


def test_max_batch(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "trainfit.models.zoo:melody_transformer", "--seq", "128"]
    code = main([*args, "--device", "rtx-4060", "--max-batch", "--margin", "0.1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("largest micro-batch that fits rtx-4060 keeping 10% free: ")
    assert " would need " in out


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.slow
def test_command_process_exits_with_the_code_and_all_output() -> None:
    """`python -m trainfit` skips the interpreter's teardown; nothing printed is lost."""
    ok = _python(
        "-m", "trainfit", "estimate", "trainfit.models.zoo:emotion_mlp", "--batch", "4", "--json"
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["spec"]["batch"] == 4
    bad = _python("-m", "trainfit", "estimate", "gpt3")
    assert bad.returncode == 1
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith("trainfit: error: unknown model 'gpt3'")


@pytest.mark.slow
def test_package_and_cli_import_without_torch() -> None:
    """The CLI sets up its process before the heavy imports: importing it loads no torch."""
    probe = _python(
        "-c",
        "import sys, trainfit, trainfit.cli.main; print('torch' in sys.modules);"
        "print(trainfit.TrainSpec.__name__, 'torch' in sys.modules)",
    )
    assert probe.stdout.split() == ["False", "TrainSpec", "True"], probe.stderr


@pytest.mark.slow
def test_estimate_is_the_function_whichever_import_comes_first() -> None:
    probe = _python(
        "-c",
        "import trainfit.estimator.step, trainfit.plan; from trainfit import estimate;"
        "print(callable(estimate), type(estimate).__name__)",
    )
    assert probe.stdout.split() == ["True", "function"], probe.stderr


@pytest.mark.slow
def test_plan_with_a_worker_exits_cleanly() -> None:
    """A plan whose ladder ran in a worker process: the command ends, with nothing on stderr
    (no leaked semaphores) and no process left holding its output (run() would hang)."""
    probe = _python(
        "-c",
        "import sys, trainfit.plan as p; p.WORKER_PARAMETERS = 0;"
        "from trainfit.cli.main import entry;"
        "sys.argv = ['trainfit', 'plan', 'trainfit.models.zoo:melody_transformer',"
        " '--seq', '256', '--effective-batch', '64', '--device', 'h100', '--jobs', '2',"
        " '--json']; entry()",
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stderr == ""
    assert json.loads(probe.stdout)["ladder"]


def test_a_closed_worker_leaves_no_process() -> None:
    import multiprocessing

    from trainfit.hardware.catalog import get_device
    from trainfit.plan.ladder import ladder_steps
    from trainfit.plan.worker import LadderWorker
    from trainfit.spec import TrainSpec

    spec = TrainSpec(model="trainfit.models.zoo:melody_transformer", seq_len=256)
    device = get_device("h100")
    steps = [(s.spec, s.micro_batch) for s in ladder_steps(spec, 64, device)]
    worker = LadderWorker(steps, device)
    worker.close()  # NB: while it is still starting or tracing
    assert multiprocessing.active_children() == []


def test_data_rate_shows_an_input_bound_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "trainfit.models.zoo:emotion_mlp", "--device", "rtx-4060", "--batch"]
    assert main([*argv, "32", "--time", "--samples", "10000", "--data-rate", "50"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "input-bound: 640.0 ms of loading per step at 50 samples/s" in out
    assert main([*argv, "32", "--time", "--samples", "10000"]) == 0
    assert "data loading not counted" in " ".join(capsys.readouterr().out.split())
    assert main([*argv, "32", "--time", "--data-rate", "50"]) == 1
    assert "--data-rate needs the data size" in capsys.readouterr().err


def test_measure_data_times_a_loader(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my_loader.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "def make():\n"
        "    return DataLoader(TensorDataset(torch.zeros(640, 3)), batch_size=32)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["measure-data", "my_loader:make", "--batches", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["batches"] == 5 and data["samples"] == 160 and data["samples_per_second"] > 0
    assert main(["measure-data", "my_loader:nothing"]) == 1
    assert "has no attribute 'nothing'" in capsys.readouterr().err


def test_a_step_that_does_not_fit_is_not_priced_and_exits_3(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["estimate", "trainfit.models.zoo:melody_transformer", "--seq", "128"]
    code = main([*args, "--batch", "2048", "--device", "rtx-4060", "--samples", "100000"])
    out, err = capsys.readouterr()
    assert code == 3
    assert "does NOT fit" in out and "step time: " in out
    assert "cost of the run" not in out and "run: " not in out
    assert err.startswith("trainfit: the step does not fit rtx-4060; its run is not priced")
    assert "adding --max-batch" in err and "trainfit plan trainfit.models.zoo:melody_" in err
    assert "--effective-batch 2048 --device rtx-4060" in err


def test_every_command_in_the_table_registers_its_flags_and_runs_a_function() -> None:
    import importlib

    from trainfit.cli.main import COMMANDS, _parser

    for name, target in COMMANDS.items():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target
        assert _parser(name).format_usage() == f"usage: trainfit [-h] {{{name}}} ...\n"


def test_a_command_imports_only_its_own_module() -> None:
    code = (
        "import sys, io, contextlib\n"
        "from trainfit.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['models'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('trainfit.cli.')))\n"
        "print('torch' in sys.modules)\n"
    )
    probe = _python("-c", code)
    assert probe.stdout.splitlines() == [
        "['trainfit.cli.interrupt', 'trainfit.cli.main', 'trainfit.cli.models']",
        "False",
    ], probe.stderr
