"""`trainfit plan spec.yaml`: a spec file turned into `plan` options, one plan per model.

The file (loaded by `trainfit.specfile.load_plan_spec`) becomes, for each model, the same
`argparse.Namespace` that `trainfit plan MODEL --option ...` parses: the parser's defaults,
then the file's values (`trainfit.specfile.fields.FIELDS` says which field sets which option;
each value goes through the option's own type and choices), then the options given on the
command line (only those actually typed). `cli.plan.run` runs each namespace: there is one code
path. The namespace also carries `spec_file` (the PlanFile), `spec_model` (the entry's name) and
`spec_index`, so that the report can reach the title, description and claims.

Known limitations: with several models, `--config-dir` and `--export-dir` get a subdirectory
per model (`DIR/<name>`) so that the models' files do not overwrite each other; `--report` is
left to the report to share. `pkg.module:fn` paths are imported from PYTHONPATH as on the
command line, not from the spec file's directory.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainfit.errors import SpecError, SpecFileError, TrainfitError, UnknownNameError
from trainfit.specfile.fields import FIELDS, PER_MODEL_FIELDS, PER_MODEL_SECTIONS, Field
from trainfit.specfile.schema import ModelEntry, PlanFile, StageEntry

_PROBLEM_DESTS = {
    "seq_len": "seq",
    "usd_rate": "fx",
    "deadline_hours": "deadline",
    "inputs": "input",
    "input": "input",
}
"""TrainSpec/RunSpec names in their problems that are not the option's destination."""


_ALTERNATIVES = (("epochs", "stage"), ("samples", "tokens"))
"""Options that exclude each other: giving one nearer drops the other (see _drop_alternatives)."""


def is_spec_file(model: str) -> bool:
    """Whether the `plan` positional names a spec file (a path ending in .yaml or .yml)."""
    return model.lower().endswith((".yaml", ".yml"))


def run(
    args: argparse.Namespace,
    argv: list[str],
    make_parser: Callable[[], argparse.ArgumentParser],
    run_plan: Callable[[argparse.Namespace], int],
) -> int:
    """Plan every model of the spec file `args.model`; `argv` tells which options were typed."""
    from trainfit.specfile.loader import load_plan_spec

    planfile = load_plan_spec(args.model)
    parser = _plan_parser(make_parser())
    given = _typed_options(make_parser, argv)
    namespaces = plan_namespaces(planfile, parser, given)
    if len(namespaces) == 1:
        return _run_one(planfile, namespaces[0], run_plan)
    code = 0
    if namespaces[0].json:  # NB: one JSON object keyed by the models' names
        out = {}
        for ns in namespaces:
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                code = max(code, _run_one(planfile, ns, run_plan))
            out[ns.spec_model] = json.loads(buffer.getvalue())
        print(json.dumps(out, indent=2))
        return code
    from rich.console import Console

    for ns in namespaces:
        Console().rule(f"model {ns.spec_model} ({ns.model})")
        code = max(code, _run_one(planfile, ns, run_plan))
    return code


def plan_namespaces(
    planfile: PlanFile, parser: argparse.ArgumentParser, given: dict[str, Any] | None = None
) -> list[argparse.Namespace]:
    """One `plan` namespace per model: defaults, the file's values, then `given` (typed
    options); SpecFileError lists every problem with its line."""
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    defaults = {
        dest: copy.copy(a.default) for dest, a in actions.items() if a.default != argparse.SUPPRESS
    }
    problems: list[str] = []
    out = []
    entries = planfile.entries()
    for index, entry in enumerate(entries):
        values = dict(defaults)
        origins: dict[str, str] = {}
        found: list[str] = []
        for field in FIELDS:
            value, path = _field_value(planfile, entry, index, field)
            if value is None:
                continue
            where = _where(planfile, path)
            action = actions.get(field.dest)
            if action is None:
                found.append(f"{where}: this trainfit's `plan` has no {field.option} option")
                continue
            try:
                values[field.dest] = _option_value(planfile, field, action, value)
                origins[field.dest] = path
            except ValueError as exc:
                found.append(f"{where}: {exc}")
        _drop_alternatives(values, defaults, origins, given or {})
        values.update(copy.deepcopy(given or {}))
        ns = argparse.Namespace(command="plan", **values)
        ns.spec_file = planfile
        ns.spec_model = entry.label
        ns.spec_index = index
        if len(entries) > 1:
            _per_model_directories(ns)
        found += _value_problems(planfile, ns, index, origins)
        problems += sorted(found, key=lambda p: _line_of(planfile, p))
        out.append(ns)
    if problems:
        raise SpecFileError(planfile.source, problems)
    return out


def _drop_alternatives(
    values: dict[str, Any],
    defaults: dict[str, Any],
    origins: dict[str, str],
    given: dict[str, Any],
) -> None:
    """Of two options that exclude each other (--epochs/--stage, --samples/--tokens), the one
    given nearer (typed, then the model's entry) replaces the other given further out."""

    def rank(dest: str) -> int:
        if dest in given:
            return 2
        if dest not in origins:
            return -1
        return 1 if origins[dest].startswith("models[") else 0

    for first, second in _ALTERNATIVES:
        for near, far in ((first, second), (second, first)):
            if far in origins and rank(near) > rank(far):
                values[far] = copy.copy(defaults.get(far))
                del origins[far]


def _line_of(planfile: PlanFile, problem: str) -> int:
    """A problem's line (0 where it has none), to list them in the file's order."""
    line = problem.removeprefix(f"{planfile.source}:").split(":", 1)[0]
    return int(line) if line.isdigit() else 0


def _run_one(
    planfile: PlanFile, ns: argparse.Namespace, run_plan: Callable[[argparse.Namespace], int]
) -> int:
    """`cli.plan.run` of one model; its errors name the model and the model's line."""
    try:
        return run_plan(ns)
    except SpecFileError:
        raise
    except TrainfitError as exc:
        where = _where(planfile, f"models[{ns.spec_index}]")
        raise SpecFileError(planfile.source, [f"{where} ({ns.spec_model}): {exc}"]) from exc


def _plan_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `plan` subparser of the `trainfit` parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["plan"]


def plan_parser(make_parser: Callable[[], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The `plan` subparser of a fresh `trainfit` parser (for tests and tools)."""
    return _plan_parser(make_parser())


def _typed_options(
    make_parser: Callable[[], argparse.ArgumentParser], argv: list[str]
) -> dict[str, Any]:
    """The `plan` options typed in `argv` (their parsed values), without defaults."""
    parser = make_parser()
    for action in _plan_parser(parser)._actions:
        action.default = argparse.SUPPRESS
    typed = vars(parser.parse_args(argv))
    return {k: v for k, v in typed.items() if k not in ("command", "model")}


def _field_value(
    planfile: PlanFile, entry: ModelEntry, index: int, field: Field
) -> tuple[Any, str]:
    """The field's value for this model (a model's own section wins) and its path."""
    if field.path.startswith("models[]."):
        rest = field.path.removeprefix("models[].")
        return _get(entry, rest), f"models[{index}].{rest}"
    if field.path == "inference":
        return (True if planfile.inference is not None else None), "inference"
    if field.path in PER_MODEL_FIELDS and getattr(entry, field.path) is not None:
        return getattr(entry, field.path), f"models[{index}].{field.path}"
    section = field.path.split(".")[0]
    if section in PER_MODEL_SECTIONS:
        value = _get(entry, field.path)
        if value is not None:
            return value, f"models[{index}].{field.path}"
    return _get(planfile, field.path), field.path


def _get(obj: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        if obj is None:
            return None
        obj = getattr(obj, name)
    return obj


def _where(planfile: PlanFile, path: str) -> str:
    line = planfile.lines.get(path)
    return f"{planfile.source}:{line}: {path}" if line else f"{planfile.source}: {path}"


def _option_value(planfile: PlanFile, field: Field, action: argparse.Action, value: Any) -> Any:
    """A field's value as the option's parsed value (through its type and choices)."""
    if field.dest == "stage":
        value = [_stage_text(stage) for stage in value]
    elif field.dest == "price":
        value = [f"{name}={price!r}" for name, price in value.items()]
    elif field.dest == "model" or field.relative_path:
        value = _relative(planfile.directory, value, must_exist=field.dest == "model")
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value if isinstance(action, argparse._StoreTrueAction) else not value
    many = isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+")
    if many:
        items = value if isinstance(value, list) else [value]
        return [_typed(action, item) for item in items]
    if isinstance(value, list):  # NB: a list for a one-value option is its comma form (a,b)
        value = ",".join(str(v) for v in value)
    return _typed(action, value)


def _typed(action: argparse.Action, value: Any) -> Any:
    """`value` as argparse would parse its text for this option."""
    text = value if isinstance(value, str) else str(value)
    if action.type is not None:
        try:
            value = action.type(text)
        except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
            option = action.option_strings[0]
            raise ValueError(f"invalid value {text!r} for {option}: {exc}") from None
    else:
        value = text
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(str(c) for c in action.choices)
        raise ValueError(f"{value!r} is not one of {choices}")
    return value


def _stage_text(stage: StageEntry) -> str:
    """A stage as the `--stage EPOCHS[:PATTERN,...]` text."""
    return repr(stage.epochs) + (":" + ",".join(stage.freeze) if stage.freeze else "")


def _relative(directory: Path, value: str, *, must_exist: bool) -> str:
    """A relative path resolved against the spec file's directory (a model: only where such a
    file or directory exists, so that catalog names and hub ids stay as they are)."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    candidate = directory / path
    if must_exist and not candidate.exists() and not value.startswith(("./", "../")):
        return value
    return str(candidate)


def _per_model_directories(ns: argparse.Namespace) -> None:
    """With several models, each writes configs and exports under its own subdirectory."""
    name = re.sub(r"[^\w.-]+", "_", ns.spec_model)
    for dest in ("config_dir", "export_dir"):
        if getattr(ns, dest, None):
            setattr(ns, dest, str(Path(getattr(ns, dest)) / name))
    if getattr(ns, "export", None) and not getattr(ns, "export_dir", None):
        ns.export_dir = name


def _value_problems(
    planfile: PlanFile, ns: argparse.Namespace, index: int, origins: dict[str, str]
) -> list[str]:
    """The names and values trainfit checks (devices, precision, TrainSpec, RunSpec), each at
    the line of the field that set it (or the model's line)."""
    from trainfit.cli import run_args
    from trainfit.hardware.catalog import get_device
    from trainfit.spec import InputSpec, Precision, TrainSpec, parse_enum

    model_where = f"{_where(planfile, f'models[{index}]')} ({ns.spec_model})"

    def where(dest: str, item: int | None = None) -> str:
        path = origins.get(dest)
        if path is None:
            return model_where
        return _where(planfile, path if item is None else f"{path}[{item}]")

    problems = []
    if ns.effective_batch is None and not ns.inference:
        problems.append(
            f"{model_where}: no effective batch: add training.effective_batch "
            "(or effective_batch in the model entry)"
        )
    for number, device in enumerate(ns.device):
        try:
            get_device(device)
        except UnknownNameError as exc:
            problems.append(f"{where('device', number)}: {exc}")
    if ns.precision:
        try:
            parse_enum(Precision, "precision", ns.precision)
        except UnknownNameError as exc:
            problems.append(f"{where('precision')}: {exc}")
    inputs_ok = True
    for number, text in enumerate(ns.input):
        try:
            InputSpec.parse(text)
        except TrainfitError as exc:
            inputs_ok = False
            problems.append(f"{where('input', number)}: {exc}")
    checks: list[Callable[[], object]] = [
        lambda: run_args.check_sized(run_args.run_spec(ns), ns),
    ]
    if inputs_ok:
        checks.append(
            lambda: TrainSpec(
                model=ns.model,
                seq_len=ns.seq,
                inputs=tuple(ns.input),
                multiplier=ns.multiplier,
                optimizer=ns.optimizer,
                freeze=tuple(ns.freeze),
                loss=ns.loss,
                step_fn=ns.step_fn,
                # NB: the devices were checked one by one above
                device="h100",
            )
        )
    for check in checks:
        try:
            check()
        except SpecError as exc:
            problems += [f"{where(_problem_dest(p))}: {p}" for p in exc.problems]
        except TrainfitError as exc:
            problems.append(f"{where(_problem_dest(str(exc)))}: {exc}")
    return problems


def _problem_dest(problem: str) -> str:
    """The option a TrainSpec/RunSpec problem is about, from its first words."""
    words = problem.split()
    word = words[1] if words[0] == "unknown" and len(words) > 1 else words[0]
    word = word.strip("-,'").replace("-", "_")
    return _PROBLEM_DESTS.get(word, word)


def print_error(exc: SpecFileError) -> None:
    """The CLI's rendering: one line, or a header line and one line per problem."""
    for line in exc.text().splitlines():
        print(f"trainfit: error: {line}" if not line.startswith("  ") else line, file=sys.stderr)
