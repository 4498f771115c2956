"""What a plan can be exported as (`ExportFormat`), each format's file name and the packages it
needs where the job trains.

`hf`, `lightning`, `accelerate` and `yaml` write one file per device from its
`TrainerLayout` (`trainfit.export.layout`); `torchrun` and `deepspeed` write each device's
multi-GPU plan as launch files (`trainfit.export.launch`, see docs/multi-gpu.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from enum import Enum

from trainfit.errors import TrainfitError, UnknownNameError


class ExportFormat(str, Enum):
    """What a plan can be exported as."""

    HF = "hf"
    """Hugging Face `TrainingArguments` keyword arguments (JSON)."""
    LIGHTNING = "lightning"
    """PyTorch Lightning `Trainer` arguments, with the DataLoader's and module's (JSON)."""
    ACCELERATE = "accelerate"
    """An `accelerate launch --config_file` file (YAML)."""
    YAML = "yaml"
    """The seed-style config of `trainfit.export.configs` (YAML)."""
    TORCHRUN = "torchrun"
    """`launch_<device>.sh` + `fsdp2_<device>.json` + `train_fsdp2.py` (trainfit.distributed)."""
    DEEPSPEED = "deepspeed"
    """`ds_config_<device>.json` + `accelerate_ds_<device>.yaml` (schema-checked)."""


_FILE = {
    ExportFormat.HF: "hf_{}.json",
    ExportFormat.LIGHTNING: "lightning_{}.json",
    ExportFormat.ACCELERATE: "accelerate_{}.yaml",
    ExportFormat.YAML: "config_{}.yaml",
    ExportFormat.TORCHRUN: "launch_{}.sh",
    ExportFormat.DEEPSPEED: "ds_config_{}.json",
}
LAUNCH_FORMATS = (ExportFormat.TORCHRUN, ExportFormat.DEEPSPEED)
"""Formats of several files per device, from the device's multi-GPU plan."""

_PACKAGES: dict[ExportFormat, tuple[tuple[tuple[str, ...], ...], str]] = {
    # NB: per format, the packages that must all be importable (each entry: any one of its
    # names), and the install command
    ExportFormat.HF: ((("transformers",), ("accelerate",)), "pip install transformers accelerate"),
    ExportFormat.LIGHTNING: ((("lightning", "pytorch_lightning"),), "pip install lightning"),
    ExportFormat.ACCELERATE: ((("accelerate",),), "pip install accelerate"),
    ExportFormat.YAML: ((), ""),
    ExportFormat.TORCHRUN: ((), ""),
    ExportFormat.DEEPSPEED: ((), ""),
}


def export_format(fmt: ExportFormat | str) -> ExportFormat:
    """`fmt` as an `ExportFormat` (its value, any case); UnknownNameError listing the formats."""
    if isinstance(fmt, ExportFormat):
        return fmt
    for member in ExportFormat:
        if member.value == str(fmt).strip().lower():
            return member
    raise UnknownNameError("export format", str(fmt), [m.value for m in ExportFormat])


def export_name(fmt: ExportFormat | str, device: str) -> str:
    """The file name of `device`'s export in `fmt`, e.g. `hf_h100.json`."""
    return _FILE[export_format(fmt)].format(device)


def require_packages(formats: Iterable[ExportFormat | str]) -> None:
    """TrainfitError naming what to install when a format's package is missing (checked
    without importing it)."""
    for fmt in (export_format(f) for f in formats):
        needs, command = _PACKAGES[fmt]
        missing = [names[0] for names in needs if not any(_installed(name) for name in names)]
        if missing:
            raise TrainfitError(
                f"the {fmt.value} export needs {' and '.join(missing)}, which "
                f"{'is' if len(missing) == 1 else 'are'} not installed: {command}"
            )


SCRIPT_FORMATS = (ExportFormat.TORCHRUN,)
"""Formats that write a training script building the model from its import path (the others
configure the user's own script)."""


def live_export_problems(model_class: str, formats: Iterable[ExportFormat | str]) -> list[str]:
    """Why `formats` are not exported for a live model of class `model_class`: one line per
    format whose training script imports the model by a path, which a live model has not."""
    chosen = dict.fromkeys(export_format(f) for f in formats)
    others = ", ".join(f.value for f in ExportFormat if f not in SCRIPT_FORMATS)
    return [
        f"export {fmt.value!r} writes a training script that imports the model by its import "
        f"path, which a live {model_class} has not: give the model as pkg.module:factory to "
        f"export {fmt.value}, or export one of {others} for your own training script"
        for fmt in chosen
        if fmt in SCRIPT_FORMATS
    ]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # NB: a module set to None, or without a spec
        return False


__all__ = [
    "LAUNCH_FORMATS",
    "SCRIPT_FORMATS",
    "ExportFormat",
    "export_format",
    "export_name",
    "live_export_problems",
    "require_packages",
]
