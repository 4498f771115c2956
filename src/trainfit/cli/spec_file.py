"""`trainfit plan spec.yaml`: a spec file planned by `trainfit.run_plan_file`, rendered.

The options typed on the command line (only those actually typed) override the file's values
(`trainfit.specfile.options.resolve_plan_file`); each model's result is rendered as
`trainfit plan MODEL` renders it, under a rule naming the model when there are several (with
--json: one object keyed by the models' names), and one report is written for them all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainfit.errors import SpecFileError

if TYPE_CHECKING:
    from trainfit.specfile.options import ModelOptions
    from trainfit.specfile.run import PlanResult


def is_spec_file(model: str) -> bool:
    """Whether the `plan` positional names a spec file (a path ending in .yaml or .yml)."""
    return model.lower().endswith((".yaml", ".yml"))


def run(
    args: argparse.Namespace, argv: list[str], make_parser: Callable[[], argparse.ArgumentParser]
) -> int:
    """Plan every model of the spec file `args.model`; `argv` tells which options were typed."""
    from rich.console import Console

    from trainfit.cli import plan, report_args
    from trainfit.cli.progress import shown, status
    from trainfit.io import staged_directories
    from trainfit.specfile.duration import check_confirmed, workload
    from trainfit.specfile.options import resolve_plan_file
    from trainfit.specfile.run import load_checked, run_plan_file

    overrides = plan.typed_options(typed_options(make_parser, argv))
    plan_file = load_checked(args.model, overrides)
    models = resolve_plan_file(plan_file, overrides)
    check_confirmed(workload([m.options for m in models]), args.yes)
    outputs = plan_file.outputs
    as_json_out = bool(overrides.get("json") or (outputs is not None and outputs.json))
    show = shown(as_json_out)
    several = len(plan_file.entries()) > 1
    as_json: dict[str, object] = {}

    def start(model: ModelOptions) -> None:
        """With several models, a rule naming the next one."""
        if several and not model.options.json:
            if line is not None:
                line.stop()
            Console().rule(f"model {model.name} ({model.options.model})")

    def done(model: PlanResult) -> None:
        """A model's result, as soon as it is planned (the progress line removed first)."""
        if line is not None:
            line.stop()
        if model.options.json:
            as_json[str(model.name)] = plan.as_json(model)
        else:
            plan.render(model)

    # NB: the models' files and the report are written whole or not at all: a model that
    # fails, or Ctrl-C, leaves none of them behind
    with staged_directories() as staged:
        with status(show) as line:
            result = run_plan_file(
                plan_file, overrides, on_start=start, on_model=done, outputs=staged
            )
        if as_json:
            print(json.dumps(as_json if several else next(iter(as_json.values())), indent=2))
        directory = result.models[-1].options.report
        reported = report_args.write(directory, result.models, staged, plan_file, show=show)
    for model in result.models:
        plan.print_files(model)
    report_args.print_written(reported)
    return 0


def plan_parser(make_parser: Callable[[], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The `plan` subparser of a fresh `trainfit` parser."""
    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["plan"]


def typed_options(
    make_parser: Callable[[], argparse.ArgumentParser], argv: list[str]
) -> dict[str, Any]:
    """The `plan` options typed in `argv` (their parsed values), without defaults."""
    parser = make_parser()
    for action in plan_parser(lambda: parser)._actions:
        action.default = argparse.SUPPRESS
    typed = vars(parser.parse_args(argv))
    return {k: v for k, v in typed.items() if k not in ("command", "model")}


def print_error(exc: SpecFileError) -> None:
    """The CLI's rendering: one line, or a header line and one line per problem."""
    for line in exc.text().splitlines():
        print(f"trainfit: error: {line}" if not line.startswith("  ") else line, file=sys.stderr)
