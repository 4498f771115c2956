"""`trainfit measure`: the JSON and --out file, the max-batch and latency tables, one line for
bad input or a flag it would ignore, exit 130 on Ctrl-C with what it has; on a terminal it shows
what it is doing: the estimate, the build, each step before it runs (the line removed before
each step's own line is printed), each attempt of the max-batch search; nothing with --json."""

from __future__ import annotations

import json
import sys

import pytest

from tests import measure_models
from tests.measure_models import CAPPED
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


def test_measure_command_json_and_out_file(tmp_path, capsys):
    out = tmp_path / "m.json"
    args = [
        "measure",
        CAPPED["model"],
        "--input",
        "x=B,16:float32",
        "--batch",
        "4",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--on",
        "cpu",
        "--json",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert printed["measured"]["steps"] == 2 and printed["measured"]["loop_steps"] == 2
    assert printed["comparison"]["rows"][0]["quantity"] == "device memory needed"
    step = [r for r in printed["comparison"]["rows"] if r["quantity"] == "step time (loop)"]
    assert step[0]["measured"] == printed["measured"]["loop_step_seconds"]
    assert printed["estimate"]["device"] == "cpu"


@pytest.mark.slow
def test_measure_command_max_batch_and_latency_tables(capsys):
    measure_models.LIMITS.update(train=5, eval=5)
    base = ["measure", CAPPED["model"], "--input", "x=B,16:float32", "--on", "cpu"]
    assert main([*base, "--max-batch", "--effective-batch", "12", "--no-estimate"]) == 0
    text = capsys.readouterr().out
    assert "largest micro-batch 5 (6 ran out of memory)" in text
    assert "for an effective batch of 12: micro-batch 4 x 3 accumulation" in text
    assert main([*base, "--latency", "--latency-batch", "4", "--runs", "5", "--warmup", "1"]) == 0
    text = capsys.readouterr().out
    assert "inference latency on" in text and "p99 ms" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--effective-batch", "8"],
            "--effective-batch only applies with --max-batch: add --max-batch, or drop it",
        ),
        (
            ["--runs", "5", "--latency-batch", "4"],
            "--latency-batch, --runs only apply with --latency",
        ),
        (["--limit", "64"], "--limit only applies with --max-batch"),
        (["--out", "no/such/folder/m.json"], "its folder "),
        (["--out", "."], "--out . is a directory: give the path of a .json file"),
        (["--max-batch", "--latency"], "choose one of --max-batch and --latency"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--warmup", "0"], "--warmup at least 1 (the first step creates the optimizer state)"),
        (["--on", "tpu"], "unknown local device 'tpu'"),
    ],
)
def test_measure_command_bad_input_is_one_line(extra, message, capsys):
    args = ["measure", CAPPED["model"], "--input", "x=B,16:float32", "--on", "cpu", *extra]
    if "--on" in extra:
        args = ["measure", CAPPED["model"], "--input", "x=B,16:float32", *extra]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("trainfit: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_measure_command_interrupted_prints_what_it_has_and_exits_130(capsys):
    measure_models.LIMITS["interrupt_after"] = 3
    args = [
        "measure",
        CAPPED["model"],
        "--input",
        "x=B,16:float32",
        "--on",
        "cpu",
        "--steps",
        "10",
        "--warmup",
        "1",
        "--no-estimate",
    ]
    assert main(args) == 130
    out = capsys.readouterr().out
    assert "1 warm-up + 2 timed steps (interrupted)" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-batch", "--steps", "5"], "with --max-batch use --attempt-steps"),
        (["--latency", "--batch", "8"], "give the batch as --latency-batch"),
        (["--max-batch", "--effective-batch", "0"], "--effective-batch must be at least 1, got 0"),
        (["--device", "h100"], "--device h100 is a cuda device but the steps run on"),
    ],
)
def test_measure_command_refuses_flags_it_would_ignore(extra, message, capsys):
    args = ["measure", CAPPED["model"], "--input", "x=B,16:float32", "--on", "cpu", *extra]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.slow
def test_max_batch_keeps_the_batch_given_and_needs_no_gpu_prediction(capsys):
    measure_models.LIMITS.update(train=5, eval=5)
    args = [
        "measure",
        CAPPED["model"],
        "--input",
        "x=B,16:float32",
        "--on",
        "cpu",
        "--batch",
        "4",
        "--grad-accum",
        "3",
        "--max-batch",
        "--json",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["max_micro_batch"], out["micro_batch"], out["grad_accum"]) == (5, 4, 3)
    assert out["predicted"] is None
    assert (
        "keeping the effective batch of --batch 4 x --grad-accum 3 = 12" in out["command_notes"][0]
    )
