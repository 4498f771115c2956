"""`trainfit.report.document.verify`: the commands that check a setting on the machine."""

from __future__ import annotations

import shlex

from tests.report.document.wide import INPUT, MODEL, _device
from trainfit.cli.main import _parser
from trainfit.report.document import to_markdown


def test_verify_commands_are_the_settings_flags_and_parse(report, planned) -> None:
    s = _device(planned, "rtx-4060").setting
    (verify,) = [v for v in report.models[0].stages[0].verify if v.device == "rtx-4060"]
    commands = dict(verify.commands)
    largest = commands["the real largest micro-batch, keeping the effective batch"]
    assert largest == (
        f"trainfit measure {MODEL} --input {INPUT} --precision bf16 --optimizer adamw "
        "--max-batch --effective-batch 32 --on cuda --device rtx-4060"
    )
    for command in commands.values():
        assert command in to_markdown(report)
        args = _parser().parse_args(shlex.split(command)[1:])
        assert args.precision == "bf16" and args.input == [INPUT]
    steps = _parser().parse_args(
        shlex.split(commands["real steps beside the estimate (memory and time)"])[1:]
    )
    assert (steps.batch, steps.grad_accum) == (s.micro_batch, s.grad_accum)
