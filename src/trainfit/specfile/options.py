"""One model's plan options (`PlanOptions`), and a spec file resolved into them.

`PlanOptions` is what `trainfit plan MODEL --option ...` asks for, typed: one field per
option, named as the option (`--effective-batch` -> `effective_batch`), with the option's
default. `resolve_plan_file` turns a loaded spec file into one `PlanOptions` per model: the
defaults, then the file's values (`trainfit.specfile.fields.FIELDS` says which field sets which
option; each value is checked against the option's type and choices), then `overrides` (the
options typed on the command line). Every problem is collected with its line and raised once as
a SpecFileError.

Known limitations: with several models, `config_dir` and `export_dir` get a subdirectory per
model (`DIR/<name>`) so that the models' files do not overwrite each other; `report` is shared
by the models (one report). `pkg.module:fn` paths are imported from PYTHONPATH as on the
command line, not from the spec file's directory. `stage` and `price` hold the options' text
forms (`EPOCHS[:PATTERN,...]`, `INSTANCE=USD_PER_HOUR`), as `input` does
(`NAME=B,...:DTYPE`).

From Python, `model` may be a live `nn.Module` with its `sample` batch (and `loss`/`step_fn`
callables), as `estimate()` takes one (`trainfit.models.live`): it is planned in this process
(no worker) and never kept on disk; its `config_dir` files and report name it by its class
and check it with Python calls; an `export` whose training script imports the model
(torchrun) is refused. A spec file's models are import paths.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from trainfit.errors import SpecError, SpecFileError, TrainfitError, UnknownNameError
from trainfit.export.formats import ExportFormat, live_export_problems
from trainfit.models.live import UserBatch, live_problems
from trainfit.specfile.checks import check_sized, run_spec
from trainfit.specfile.fields import FIELDS, PER_MODEL_FIELDS, PER_MODEL_SECTIONS, Field
from trainfit.specfile.schema import ModelEntry, PlanFile, StageEntry
from trainfit.timing.run import DEFAULT_HOURS_PER_YEAR, DEFAULT_KWH_PRICE, DEFAULT_YEARS

EXPORT_FORMATS = tuple(f.value for f in ExportFormat)
"""The values `export` takes."""


def _default_jobs() -> int:
    return min(2, os.cpu_count() or 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanOptions:
    """One model's plan, as `trainfit plan`'s options ask for it (each field is the option of
    its name; `docs/spec-file.md` documents them)."""

    model: str | nn.Module
    """Catalog name, HF model directory or hub id, or pkg.module:fn; from Python, a live
    `nn.Module` with its `sample` (planned in this process; its traces are not kept on disk)."""
    sample: UserBatch | None = field(default=None, compare=False)
    """A live model's batch (a tensor, a tuple ending in the target, or a dict of tensors;
    batch dimension first): its inputs. Python only."""
    effective_batch: int | None = None
    """Samples (pairs with `preference`) per optimizer step; required unless `inference`."""
    seq: int | None = None
    """Sequence length."""
    input: tuple[str, ...] = ()
    """Inputs of a plain module, NAME=B,...:DTYPE."""
    multiplier: int = 1
    """Per-sample multiplier of the batch dimension."""
    precision: str | None = None
    """Force one precision (default: the best per device)."""
    optimizer: str = "adamw"
    """The optimizer's name."""
    optimizer_path: str = "auto"
    """PyTorch's implementation of the optimizer step: auto | foreach | for-loop | fused."""
    freeze: tuple[str, ...] = ()
    """Globs of frozen parameter names."""
    loss: str | Callable[..., Any] | None = None
    """pkg.module:fn(output, batch) -> loss (with a live model, the function itself)."""
    step_fn: str | Callable[..., Any] | None = None
    """pkg.module:fn(model, batch) -> loss (with a live model, the function itself)."""
    task: str | None = None
    """The head to train: a transformers task or its AutoModelFor... class name."""
    device: tuple[str, ...] = ()
    """Devices to plan for (default `DEFAULT_DEVICES`)."""
    margin: float = 0.10
    """Fraction of device memory kept free."""
    jobs: int = field(default_factory=_default_jobs)
    """Processes to trace in (default: 2 where there are 2 cores)."""
    json: bool = False
    """Print JSON instead of tables (the CLI's rendering)."""
    config_dir: str | None = None
    """Where config_<device>.yaml is written for each device that fits."""
    export: tuple[str, ...] = ()
    """Trainer configs to write (`EXPORT_FORMATS`)."""
    strategy: str | None = None
    """The multi-GPU engine: auto | ddp | fsdp2 | fsdp2-hybrid | zero1 | zero2 | zero3."""
    offload: str | None = None
    """none | optimizer | params: what host RAM holds (default: auto)."""
    nodes: int | None = None
    """Machines to plan over."""
    stage: tuple[str, ...] = ()
    """Stages of a staged schedule, each EPOCHS[:PATTERN,...]."""
    export_dir: str | None = None
    """Where `export` writes (default: the current directory)."""
    lora: int | None = None
    """LoRA adapters of this rank."""
    lora_alpha: float | None = None
    """LoRA alpha (default 2 x rank)."""
    lora_dropout: float | None = None
    """Dropout on the LoRA input (default 0)."""
    lora_targets: str | None = None
    """Modules to adapt, comma-separated."""
    qlora: bool = False
    """4-bit NF4 base with paged 8-bit AdamW (implies LoRA rank 8 unless given)."""
    preference: str | None = None
    """Preference training (dpo)."""
    reference: str = "model"
    """DPO reference: model | precomputed."""
    weights_dtype: str = "auto"
    """The dtype the weights load in: auto | fp32 | bf16 | fp16."""
    reference_dtype: str | None = None
    """The DPO reference copy's dtype (default: the policy's weights')."""
    inference: bool = False
    """Plan greedy generation (beside the training plan, or alone without an effective batch)."""
    context: int | None = None
    """Prompt tokens (inference)."""
    new_tokens: int | None = None
    """Tokens generated per sequence (inference)."""
    inference_precision: str = "bf16"
    """Weight precisions to plan, comma-separated."""
    infer_batch: tuple[int, ...] = ()
    """Sequences generated together (inference; default 1)."""
    samples: int | None = None
    """Training samples per epoch."""
    tokens: int | None = None
    """Training tokens per epoch."""
    epochs: float = 1.0
    """Epochs."""
    eval_fraction: float = 0.0
    """Evaluation samples per epoch as a fraction of the training samples."""
    data_rate: float | None = None
    """Samples per second one process's data loader delivers."""
    gpus: int = 1
    """GPUs of the device (1: the GPU count is searched where needed)."""
    kwh_price: float = DEFAULT_KWH_PRICE
    """Electricity price per kWh in USD."""
    watts: float | None = None
    """Power the local machine draws."""
    currency: str = "USD"
    """Currency of the costs shown."""
    fx: float | None = None
    """Units of `currency` per USD."""
    years: float = DEFAULT_YEARS
    """Years a local device is used."""
    hours_per_year: float = DEFAULT_HOURS_PER_YEAR
    """Hours a year a local device trains."""
    deadline: float | None = None
    """Hours the run must fit in."""
    price: tuple[str, ...] = ()
    """Instance prices replacing the catalog's, each INSTANCE=USD_PER_HOUR."""
    measured_step: float | None = None
    """Seconds per optimizer step measured with the plan's setting on `measured_on`."""
    measured_on: str | None = None
    """The device `measured_step` was measured on (default: the first device)."""
    report: str | None = None
    """Directory of the report."""

    def __post_init__(self) -> None:
        problems = []
        hints = typing.get_type_hints(PlanOptions)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if typing.get_origin(hints[f.name]) is tuple and isinstance(value, (str, list)):
                # NB: one string where a list is expected is one item, as in a spec file
                value = (value,) if isinstance(value, str) else tuple(value)
                object.__setattr__(self, f.name, value)
            if not _accepts(hints[f.name], value):
                wanted = _WANTED.get(f.name, f.type)
                problems.append(f"PlanOptions.{f.name} must be {wanted}, got {_shown(value)}")
        if problems:
            raise SpecError(problems)
        problems = self._live_problems()
        if problems:
            raise SpecError(problems)

    def _live_problems(self) -> list[str]:
        """A live model without its sample, a sample or callables without a live model, and
        the exports whose training script would import a live model by its import path
        (valid only in this process)."""
        fields: dict[str, Any] = {"model": self.model, "loss": self.loss, "step_fn": self.step_fn}
        if self.input:
            fields["inputs"] = self.input
        problems = live_problems(fields, self.sample, "PlanOptions")
        if not isinstance(self.model, nn.Module):
            problems += [
                f"PlanOptions.{name} is a callable, which only a live model takes: give "
                f"model=<an nn.Module> with its sample, or name it as pkg.module:fn"
                for name in ("loss", "step_fn")
                if callable(getattr(self, name))
            ]
            return problems
        # NB: an unknown format is reported with the other options' problems (run_plan)
        known = [f for f in self.export if f.strip().lower() in EXPORT_FORMATS]
        return problems + live_export_problems(type(self.model).__name__, known)


_WANTED = {
    "model": "str (a catalog name, a directory or pkg.module:factory) or a live nn.Module",
    "sample": "a tensor, a tuple or list of tensors, or a dict of tensors (or None)",
    "loss": "pkg.module:fn (str), a callable with a live model, or None",
    "step_fn": "pkg.module:fn (str), a callable with a live model, or None",
}
"""The words for the fields whose types read badly in a message (`UserBatch`, unions)."""


def _shown(value: object) -> str:
    """`value` in a one-line message: its repr, or its type where that is long or spans lines
    (a module, a tensor)."""
    text = repr(value)
    return text if len(text) <= 80 and "\n" not in text else f"a {type(value).__name__}"


def _accepts(hint: Any, value: object) -> bool:
    """Whether `value` is of the type hint `hint` (an int is a float; a bool is neither; a
    path is a str, for the directory fields)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):
        return any(_accepts(member, value) for member in typing.get_args(hint))
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return isinstance(value, tuple) and all(_accepts(item, v) for v in value)
    if hint is Any:
        return True
    if origin is collections.abc.Callable:
        return callable(value)
    if origin is not None:  # NB: list[...], Mapping[...]: the container's type only
        return isinstance(value, origin)
    if hint in (int, float) and isinstance(value, bool):
        return False
    if hint is float:
        return isinstance(value, (int, float))
    if hint is str:
        return isinstance(value, (str, os.PathLike))
    return isinstance(value, hint)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelOptions:
    """One model of a spec file, resolved."""

    name: str
    """The entry's name (the model string when it has none)."""
    index: int
    """Its place in `models:`."""
    options: PlanOptions
    """What is planned."""


_ALTERNATIVES = (("epochs", "stage"), ("samples", "tokens"))
"""Options that exclude each other: giving one nearer drops the other (see _drop_alternatives)."""

_PROBLEM_DESTS = {
    "seq_len": "seq",
    "usd_rate": "fx",
    "deadline_hours": "deadline",
    "inputs": "input",
    "input": "input",
}
"""TrainSpec/RunSpec names in their problems that are not the option's name."""

PYTHON_ONLY = ("sample",)
"""`PlanOptions` fields that no command-line option or spec-file field sets."""

_OPTIONS = {f.name: f for f in dataclasses.fields(PlanOptions)}
_HINTS = typing.get_type_hints(PlanOptions)
_CHOICES: dict[str, tuple[str, ...]] = {"export": EXPORT_FORMATS}


def option_defaults() -> dict[str, Any]:
    """Every option's default, by name (the model has none)."""
    out: dict[str, Any] = {}
    for name, one in _OPTIONS.items():
        if one.default is not dataclasses.MISSING:
            out[name] = one.default
        elif one.default_factory is not dataclasses.MISSING:
            out[name] = one.default_factory()
    return out


def resolve_plan_file(
    plan_file: PlanFile, overrides: Mapping[str, Any] | None = None
) -> tuple[ModelOptions, ...]:
    """One `PlanOptions` per model: defaults, the file's values, then `overrides` (options by
    name, e.g. typed on the command line); SpecFileError lists every problem with its line."""
    out, problems = resolved_with_problems(plan_file, overrides)
    if problems:
        raise SpecFileError(plan_file.source, problems)
    return out


def resolved_with_problems(
    plan_file: PlanFile, overrides: Mapping[str, Any] | None = None
) -> tuple[tuple[ModelOptions, ...], list[str]]:
    """`resolve_plan_file`'s options and its problems (each with its line), not raised, so
    that a caller adds its own checks of the same models before raising them all at once."""
    given = dict(overrides or {})
    unknown = sorted(set(given) - set(_OPTIONS))
    if unknown:
        raise UnknownNameError("plan option", unknown[0], sorted(_OPTIONS))
    live = [
        name
        for name in ("model", *PYTHON_ONLY, "loss", "step_fn")
        if given.get(name) is not None and not isinstance(given[name], str)
    ]
    if live:
        raise SpecError(
            [
                f"a spec file's models are import paths: its overrides take no live model "
                f"({', '.join(live)}); plan a live model with "
                "run_plan(PlanOptions(model=module, sample=batch, ...))"
            ]
        )
    defaults = option_defaults()
    problems: list[str] = []
    out = []
    entries = plan_file.entries()
    for index, entry in enumerate(entries):
        values = dict(defaults)
        origins: dict[str, str] = {}
        found: list[str] = []
        for one in FIELDS:
            value, path = _field_value(plan_file, entry, index, one)
            if value is None:
                continue
            try:
                values[one.dest] = _option_value(plan_file, one, value)
                origins[one.dest] = path
            except ValueError as exc:
                found.append(f"{_where(plan_file, path)}: {exc}")
        _drop_alternatives(values, defaults, origins, given)
        values.update(copy.deepcopy(given))
        if len(entries) > 1:
            _per_model_directories(values, entry.label)
        options = PlanOptions(**values)
        found += _value_problems(plan_file, options, entry.label, index, origins)
        problems += sorted(found, key=lambda p: _line_of(plan_file, p))
        out.append(ModelOptions(name=entry.label, index=index, options=options))
    return tuple(out), problems


def where_model(plan_file: PlanFile, model: ModelOptions) -> str:
    """Where a model's entry is, for its errors: `spec.yaml:3: models[0] (name)`."""
    return f"{_where(plan_file, f'models[{model.index}]')} ({model.name})"


def _drop_alternatives(
    values: dict[str, Any],
    defaults: dict[str, Any],
    origins: dict[str, str],
    given: Mapping[str, Any],
) -> None:
    """Of two options that exclude each other (epochs/stage, samples/tokens), the one given
    nearer (overridden, then the model's entry) replaces the other given further out."""

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


def _line_of(plan_file: PlanFile, problem: str) -> int:
    """A problem's line (0 where it has none), to list them in the file's order."""
    line = problem.removeprefix(f"{plan_file.source}:").split(":", 1)[0]
    return int(line) if line.isdigit() else 0


def _field_value(plan_file: PlanFile, entry: ModelEntry, index: int, one: Field) -> tuple[Any, str]:
    """The field's value for this model (a model's own section wins) and its path."""
    if one.path.startswith("models[]."):
        rest = one.path.removeprefix("models[].")
        return _get(entry, rest), f"models[{index}].{rest}"
    if one.path == "inference":
        return (True if plan_file.inference is not None else None), "inference"
    if one.path in PER_MODEL_FIELDS and getattr(entry, one.path) is not None:
        return getattr(entry, one.path), f"models[{index}].{one.path}"
    section = one.path.split(".")[0]
    if section in PER_MODEL_SECTIONS:
        value = _get(entry, one.path)
        if value is not None:
            return value, f"models[{index}].{one.path}"
    return _get(plan_file, one.path), one.path


def _get(obj: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        if obj is None:
            return None
        obj = getattr(obj, name)
    return obj


def _where(plan_file: PlanFile, path: str) -> str:
    line = plan_file.lines.get(path)
    return f"{plan_file.source}:{line}: {path}" if line else f"{plan_file.source}: {path}"


def _option_value(plan_file: PlanFile, one: Field, value: Any) -> Any:
    """A field's value as the option's value (its type and choices checked)."""
    if one.dest == "stage":
        value = [_stage_text(stage) for stage in value]
    elif one.dest == "price":
        value = [f"{name}={price!r}" for name, price in value.items()]
    elif one.dest == "model" or one.relative_path:
        value = _relative(plan_file.directory, value, must_exist=one.dest == "model")
    kind = _without_none(_HINTS[one.dest])
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(kind)[0]
        items = value if isinstance(value, list) else [value]
        return tuple(_typed(one, item, v) for v in items)
    if isinstance(value, list):  # NB: a list for a one-value option is its comma form (a,b)
        value = ",".join(str(v) for v in value)
    return _typed(one, kind, value)


def _without_none(kind: Any) -> Any:
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if typing.get_origin(kind) is not tuple and args else kind


def _typed(one: Field, kind: Callable[[str], Any], value: Any) -> Any:
    """`value` as the option's type reads its text, checked against its choices."""
    text = value if isinstance(value, str) else str(value)
    try:
        out = kind(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid value {text!r} for {one.option}: {exc}") from None
    choices = _CHOICES.get(one.dest)
    if choices is not None and out not in choices:
        raise ValueError(f"{out!r} is not one of {', '.join(choices)}")
    return out


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


def _per_model_directories(values: dict[str, Any], label: str) -> None:
    """With several models, each writes configs and exports under its own subdirectory."""
    name = re.sub(r"[^\w.-]+", "_", label)
    for dest in ("config_dir", "export_dir"):
        if values.get(dest):
            values[dest] = str(Path(values[dest]) / name)
    if values.get("export") and not values.get("export_dir"):
        values["export_dir"] = name


def _value_problems(
    plan_file: PlanFile, options: PlanOptions, label: str, index: int, origins: dict[str, str]
) -> list[str]:
    """The names and values trainfit checks (devices, precision, TrainSpec, RunSpec), each at
    the line of the field that set it (or the model's line)."""
    from trainfit.hardware.catalog import get_device
    from trainfit.spec import InputSpec, Precision, TrainSpec, parse_enum

    model_where = f"{_where(plan_file, f'models[{index}]')} ({label})"

    def where(dest: str, item: int | None = None) -> str:
        path = origins.get(dest)
        if path is None:
            return model_where
        return _where(plan_file, path if item is None else f"{path}[{item}]")

    problems = []
    if options.effective_batch is None and not options.inference:
        problems.append(
            f"{model_where}: no effective batch: add training.effective_batch "
            "(or effective_batch in the model entry)"
        )
    for number, device in enumerate(options.device):
        try:
            get_device(device)
        except UnknownNameError as exc:
            problems.append(f"{where('device', number)}: {exc}")
    if options.precision:
        try:
            parse_enum(Precision, "precision", options.precision)
        except UnknownNameError as exc:
            problems.append(f"{where('precision')}: {exc}")
    inputs_ok = True
    for number, text in enumerate(options.input):
        try:
            InputSpec.parse(text)
        except TrainfitError as exc:
            inputs_ok = False
            problems.append(f"{where('input', number)}: {exc}")
    checks: list[Callable[[], object]] = [
        lambda: check_sized(run_spec(options), options),
    ]
    if inputs_ok:
        checks.append(
            lambda: TrainSpec(
                model=options.model,
                seq_len=options.seq,
                inputs=options.input,
                multiplier=options.multiplier,
                optimizer=options.optimizer,
                freeze=options.freeze,
                loss=options.loss,
                step_fn=options.step_fn,
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


__all__ = [
    "EXPORT_FORMATS",
    "PYTHON_ONLY",
    "ModelOptions",
    "PlanOptions",
    "option_defaults",
    "resolve_plan_file",
    "resolved_with_problems",
    "where_model",
]
