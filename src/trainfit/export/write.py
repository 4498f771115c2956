"""A plan's exports written as files: one per device and format (several for the launch
formats), each atomically; a device without anything to export is skipped with a note, and
`write_exports` raises when no device is left, with every reason. The lightning, hf and
accelerate exports need their package installed (the hf one needs accelerate too, as
`TrainingArguments` does): a TrainfitError names what to install.

Known limitations: the seed-style YAML carries the layout's batch split (each GPU's
micro-batch and accumulation, the GPU count); a sharded verdict has none, so it is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from trainfit.errors import SpecError, TrainfitError
from trainfit.export.accelerate import accelerate_text
from trainfit.export.configs import config_text
from trainfit.export.formats import (
    LAUNCH_FORMATS,
    ExportFormat,
    export_format,
    export_name,
    live_export_problems,
    require_packages,
)
from trainfit.export.hf import hf_training_arguments
from trainfit.export.launch import launch_files
from trainfit.export.layout import DeviceNote, LightningWrap, trainer_layout
from trainfit.export.lightning import lightning_arguments
from trainfit.io import check_writable_directory, write_atomically
from trainfit.models.live_names import is_live, model_name
from trainfit.plan.options import DevicePlan, Plan


def export_text(
    plan: Plan, device: DevicePlan, fmt: ExportFormat | str, gpus: int | None = None
) -> str:
    """The file of `device` in `fmt` (one of hf, lightning, accelerate, yaml)."""
    fmt = export_format(fmt)
    if fmt is ExportFormat.YAML and device.setting is None:
        raise TrainfitError(
            f"{device.device}: {device.verdict.value}; the seed-style YAML describes one "
            "device's setting, and this one has none"
        )
    lay = trainer_layout(plan, device, gpus)
    if fmt is ExportFormat.YAML:
        # NB: the layout's batch split, as the other files of the same directory
        return config_text(plan, device, lay)
    if fmt is ExportFormat.HF:
        return json.dumps(hf_training_arguments(lay), indent=2) + "\n"
    if fmt is ExportFormat.LIGHTNING:
        return json.dumps(lightning_arguments(lay), indent=2) + "\n"
    return accelerate_text(plan, lay, device.display)


def check_directory(directory: Path | str, what: str = "export directory") -> None:
    """Check that `directory` can be made and written, without making it: TrainfitError
    naming it otherwise (the CLI checks before planning, which takes seconds)."""
    check_writable_directory(directory, what)


@dataclass(frozen=True, kw_only=True, slots=True)
class Exported:
    """What `write_exports` wrote and what it skipped."""

    written: tuple[Path, ...]
    skipped: tuple[str, ...]
    """One line per device and format not written, with why."""
    notes: tuple[DeviceNote, ...]
    """Per device, what to do beside the files (`TrainerLayout.notes`; words:
    `trainfit.export.layout_words.device_note_text`)."""


@dataclass(kw_only=True, slots=True)
class _Collected:
    """The files, skips and notes gathered over the plan's devices before anything is written."""

    files: list[tuple[Path, str]]
    skipped: list[str]
    notes: list[DeviceNote]


def write_exports(
    plan: Plan,
    formats: Iterable[ExportFormat | str],
    directory: Path | str,
    gpus: int | None = None,
) -> Exported:
    """Write one file per device and format into `directory` (created if needed), each
    atomically; devices without anything to export are skipped. TrainfitError when a format's
    package is missing, or nothing could be written."""
    chosen = list(dict.fromkeys(export_format(f) for f in formats))
    if not chosen:
        raise SpecError(["no export format given: choose hf, lightning, accelerate or yaml"])
    if is_live(plan.spec.model):
        problems = live_export_problems(model_name(plan.spec.model), chosen)
        if problems:
            raise SpecError(problems)
    require_packages(chosen)
    directory = Path(directory)
    out = _Collected(files=[], skipped=[], notes=[])
    for device in plan.devices:
        _collect(plan, device, chosen, directory, gpus, out)
    if not out.files:
        raise TrainfitError(
            "nothing to export: "
            + "; ".join(out.skipped or [f"no device in the plan ({len(plan.devices)})"])
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrainfitError(f"cannot create the export directory {directory}: {exc}") from exc
    for path, text in out.files:
        write_atomically(path, text)
    return Exported(
        written=tuple(path for path, _ in out.files),
        skipped=tuple(out.skipped),
        notes=tuple(out.notes),
    )


def _collect(
    plan: Plan,
    device: DevicePlan,
    chosen: list[ExportFormat],
    directory: Path,
    gpus: int | None,
    out: _Collected,
) -> None:
    """Add `device`'s files in the `chosen` formats to `out`, or why each was skipped."""
    for fmt in (f for f in chosen if f in LAUNCH_FORMATS):
        try:
            out.files += [(directory / n, t) for n, t in launch_files(plan, device, fmt)]
        except TrainfitError as exc:
            out.skipped.append(f"{device.device} ({fmt.value}): {exc}")
    if all(f in LAUNCH_FORMATS for f in chosen):
        return
    try:
        lay = trainer_layout(plan, device, gpus)
    except TrainfitError as exc:
        # NB: a device that does not fit, or one the GPU count does not suit (a CPU, a
        # batch that does not split): the others are still exported
        out.skipped.append(
            str(exc) if str(exc).startswith(device.device) else f"{device.device}: {exc}"
        )
        return
    out.notes += [DeviceNote(device=device.device, note=note) for note in lay.notes]
    if lay.sharded and ExportFormat.LIGHTNING in chosen:
        wrap = LightningWrap(checkpointing=lay.checkpointing)
        out.notes.append(DeviceNote(device=device.device, note=wrap))
    for fmt in (f for f in chosen if f not in LAUNCH_FORMATS):
        if fmt is ExportFormat.YAML and device.setting is None:
            out.skipped.append(
                f"{device.device}: no seed-style YAML for a sharded run (one device's "
                "settings only)"
            )
            continue
        out.files.append(
            (directory / export_name(fmt, device.device), export_text(plan, device, fmt, gpus))
        )


__all__ = ["Exported", "check_directory", "export_text", "write_exports"]
