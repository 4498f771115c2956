"""`--help`: flags in named groups with their defaults, examples that parse, and one meaning
per flag name across the commands."""

from __future__ import annotations

import argparse

import pytest

from trainfit.cli import help as helps
from trainfit.cli import spec_file
from trainfit.cli.main import _parser, main


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize(
    ("command", "groups"),
    [
        ("estimate", ["model", "batch", "precision and memory", "device", "time and cost"]),
        ("plan", ["model", "batch", "precision and memory", "devices and GPUs", "inference"]),
        ("measure", ["model", "batch", "precision and memory", "device", "measurement"]),
    ],
)
def test_flags_come_in_groups_and_examples_end_the_help(command: str, groups: list[str]) -> None:
    parser = _commands()[command]
    text = parser.format_help()
    positions = [text.index(f"\n{title}") for title in groups]
    assert positions == sorted(positions)
    assert text.index("\noutput:") > positions[-1]
    assert text.rstrip().splitlines()[-1].startswith(f"  trainfit {command} ")
    # NB: every flag sits in a named group, none in argparse's catch-all "options"
    options = next(g for g in parser._action_groups if g.title == "options")
    assert [a.dest for a in options._group_actions] == ["help"]


@pytest.mark.parametrize("command", ["estimate", "plan", "measure"])
def test_every_example_parses(command: str) -> None:
    parser = _parser()
    examples = helps.examples(_commands()[command])
    assert len(examples) >= 4
    for argv in examples:
        assert parser.parse_args(argv).command == command


def test_defaults_are_said_once() -> None:
    text = " ".join(_commands()["estimate"].format_help().split())
    assert "--device DEVICE target device (trainfit devices) (default: h100)" in text
    assert "--batch BATCH micro-batch (samples per step) (default: 1)" in text
    assert "--margin MARGIN with --max-batch: fraction of the device's memory to keep free " \
        "(e.g. 0.1) (default: 0.0)" in text  # fmt: skip
    # NB: a help that says its default keeps its words; a flag with no value says none
    assert "epochs (default 1) " in text and "(default: 1.0)" not in text
    assert "--checkpointing gradient checkpointing --checkpoint-modules" in text
    for command in ("estimate", "plan", "measure"):
        text = " ".join(_commands()[command].format_help().split())
        assert "--seq SEQ sequence length (default: the model's maximum positions, at most " \
            "1024)" in text  # fmt: skip
    text = " ".join(_commands()["plan"].format_help().split())
    assert "measured on (default: the first --device)" in text
    assert "--context CONTEXT prompt tokens (required with --inference)" in text


def test_a_flag_name_means_one_thing_across_commands() -> None:
    meanings: dict[str, set[tuple[str, object]]] = {}
    for parser in _commands().values():
        for action in parser._actions:
            for option in action.option_strings:
                meanings.setdefault(option, set()).add((action.dest, action.type))
    assert {o: d for o, d in meanings.items() if len(d) > 1} == {}
    # NB: --batch is the training micro-batch (estimate, measure); plan takes the effective
    # batch, and the inference batch is --infer-batch
    plan = spec_file.plan_parser(_parser)
    assert "--batch" not in plan._option_string_actions
    assert plan.parse_args(["gpt2", "--infer-batch", "4", "--infer-batch", "8"]).infer_batch == [
        4,
        8,
    ]


def test_plan_with_batch_points_to_the_effective_and_inference_batches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["plan", "gpt2", "--batch", "8"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("trainfit plan: error: plan has no --batch")
    assert "--effective-batch N" in err and "--infer-batch N" in err
