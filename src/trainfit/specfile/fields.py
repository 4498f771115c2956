"""Which `trainfit plan` option each spec-file field sets: the one table of the mapping.

A field's path is dotted from the top of the file; `models[].` marks a field of each model
entry, and a `training.` or `data.` field, `devices` and `gpus` may also be given in a model
entry (its value there wins for that model). `tests/specfile/test_fields.py` walks the `plan`
parser and fails when an option has no field here, and checks that docs/spec-file.md names
every field.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One spec-file field and the `trainfit plan` option it stands for."""

    path: str
    """Dotted path in the file, e.g. `training.effective_batch`, `models[].seq`."""
    dest: str
    """The option's argparse destination, e.g. `effective_batch`."""
    option: str
    """The option as typed, e.g. `--effective-batch` (MODEL for the positional)."""
    relative_path: bool = False
    """A file-system path: relative values are relative to the spec file's directory."""


def _field(
    path: str, option: str, *, dest: str | None = None, relative_path: bool = False
) -> Field:
    name = dest or option.removeprefix("--").replace("-", "_")
    return Field(path=path, dest=name, option=option, relative_path=relative_path)


FIELDS: tuple[Field, ...] = (
    _field("models[].model", "MODEL", dest="model"),
    _field("models[].inputs", "--input"),
    _field("models[].seq", "--seq"),
    _field("models[].multiplier", "--multiplier"),
    _field("models[].task", "--task"),
    _field("models[].loss", "--loss"),
    _field("models[].step_fn", "--step-fn"),
    _field("data.samples", "--samples"),
    _field("data.tokens", "--tokens"),
    _field("data.eval_fraction", "--eval-fraction"),
    _field("data.data_rate", "--data-rate"),
    _field("training.effective_batch", "--effective-batch"),
    _field("training.epochs", "--epochs"),
    _field("training.stages", "--stage"),
    _field("training.optimizer", "--optimizer"),
    _field("training.optimizer_path", "--optimizer-path"),
    _field("training.precision", "--precision"),
    _field("training.freeze", "--freeze"),
    _field("training.lora.rank", "--lora"),
    _field("training.lora.alpha", "--lora-alpha"),
    _field("training.lora.dropout", "--lora-dropout"),
    _field("training.lora.targets", "--lora-targets"),
    _field("training.lora.qlora", "--qlora"),
    _field("training.preference.kind", "--preference"),
    _field("training.preference.reference", "--reference"),
    _field("training.preference.dtype", "--reference-dtype"),
    _field("training.weights_dtype", "--weights-dtype"),
    _field("training.strategy", "--strategy"),
    _field("training.offload", "--offload"),
    _field("training.nodes", "--nodes"),
    _field("devices", "--device"),
    _field("gpus", "--gpus"),
    _field("margin", "--margin"),
    _field("jobs", "--jobs"),
    _field("cost.kwh_price", "--kwh-price"),
    _field("cost.watts", "--watts"),
    _field("cost.currency", "--currency"),
    _field("cost.fx", "--fx"),
    _field("cost.years", "--years"),
    _field("cost.hours_per_year", "--hours-per-year"),
    _field("cost.deadline", "--deadline"),
    _field("cost.prices", "--price"),
    _field("measured.step", "--measured-step"),
    _field("measured.on", "--measured-on"),
    _field("inference", "--inference"),
    _field("inference.context", "--context"),
    _field("inference.new_tokens", "--new-tokens"),
    _field("inference.precision", "--inference-precision"),
    _field("inference.batch", "--infer-batch"),
    _field("outputs.report", "--report", relative_path=True),
    _field("outputs.config_dir", "--config-dir", relative_path=True),
    _field("outputs.export", "--export"),
    _field("outputs.export_dir", "--export-dir", relative_path=True),
    _field("outputs.json", "--json"),
)
"""Every field that sets a `trainfit plan` option, in the order of docs/spec-file.md."""

CARRIED: tuple[str, ...] = ("title", "description", "models[].name", "claims")
"""Fields that set no option: they reach the report through `args.spec_file` (the PlanFile)."""

PER_MODEL_SECTIONS: tuple[str, ...] = ("training", "data")
"""Sections whose fields a model entry may override."""

PER_MODEL_FIELDS: tuple[str, ...] = ("devices", "gpus")
"""Top-level fields a model entry may override (`models[].devices` replaces `devices`)."""


def field_for_dest(dest: str) -> Field | None:
    """The field of an option's argparse destination, or None."""
    return next((f for f in FIELDS if f.dest == dest), None)
