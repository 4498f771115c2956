"""The committed memory baseline of `trainfit check`: each model's footprint on each device.

A baseline is a JSON file (written whole or not at all, `trainfit.io`), keyed by the spec
file's model names and the devices' catalog names, so that a diff of it reads as a diff of the
models' memory:

    {
      "format": "trainfit-check-baseline/1",
      "versions": {"python": "3.12.3", "torch": "2.13.0", "transformers": "5.17.0", ...},
      "models": {
        "net": {
          "rtx-4060": {"needed_bytes": 850185420, "precision": "bf16", "checkpointing": false,
                       "optimizer": "adamw", "micro_batch": 16, "grad_accum": 1}
        }
      }
    }

`versions` records what computed the figures (an estimate is exact for one set of versions;
another torch or transformers can move it); it is read back to say so, never to refuse.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from trainfit.errors import SpecError, TrainfitError
from trainfit.io import write_atomically
from trainfit.spec import OptimizerKind, Precision, parse_enum

FORMAT = "trainfit-check-baseline/1"
"""The `format` of the baseline files this version reads and writes."""

VERSIONED = ("trainfit", "torch", "transformers", "peft")
"""The packages whose versions a baseline records (those installed)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Footprint:
    """One model's training step on one device as planned: the setting and its memory."""

    needed_bytes: int
    """Device memory the step needs at this setting (the plan's `Setting.needed_bytes`)."""
    precision: Precision
    checkpointing: bool
    optimizer: OptimizerKind
    micro_batch: int
    grad_accum: int

    def same_setting(self, other: Footprint) -> bool:
        """Whether `other` trains the same way (its memory is then comparable)."""
        return (
            self.precision,
            self.checkpointing,
            self.optimizer,
            self.micro_batch,
            self.grad_accum,
        ) == (
            other.precision,
            other.checkpointing,
            other.optimizer,
            other.micro_batch,
            other.grad_accum,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "needed_bytes": self.needed_bytes,
            "precision": self.precision.value,
            "checkpointing": self.checkpointing,
            "optimizer": self.optimizer.value,
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Baseline:
    """A baseline file read back."""

    path: Path
    footprints: Mapping[tuple[str, str], Footprint]
    """By (model name, device name)."""
    versions: Mapping[str, str]
    """The package versions that computed it."""


def current_versions() -> dict[str, str]:
    """Python's and the installed `VERSIONED` packages' versions."""
    found = {"python": platform.python_version()}
    for package in VERSIONED:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def baseline_text(footprints: Mapping[tuple[str, str], Footprint]) -> str:
    """The baseline file's text (sorted keys, so that it diffs well)."""
    models: dict[str, dict[str, Any]] = {}
    for (model, device), footprint in footprints.items():
        models.setdefault(model, {})[device] = footprint.to_dict()
    document = {"format": FORMAT, "versions": current_versions(), "models": models}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def write_baseline(path: Path | str, footprints: Mapping[tuple[str, str], Footprint]) -> None:
    """Write the baseline atomically (a crash leaves the old file or none)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise TrainfitError(f"cannot write the baseline {path}: no directory {path.parent}")
    write_atomically(path, baseline_text(footprints))


def read_baseline(path: Path | str) -> Baseline:
    """A baseline file; TrainfitError naming the file and what is wrong with it (missing:
    how to write one)."""
    path = Path(path)
    if not path.is_file():
        raise TrainfitError(
            f"baseline {path} not found; write it with `trainfit check SPEC --baseline {path} "
            "--update-baseline` and commit it"
        )
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrainfitError(f"baseline {path} is not readable JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise TrainfitError(
            f'baseline {path} is not a trainfit check baseline (expected "format": '
            f'"{FORMAT}"); write it again with --update-baseline'
        )
    problems: list[str] = []
    footprints = _footprints(document.get("models"), problems)
    versions = document.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        problems.append('"versions" must map package names to version strings')
        versions = {}
    if problems:
        raise SpecError([f"baseline {path}: {p}" for p in problems])
    return Baseline(path=path, footprints=footprints, versions=versions)


def _footprints(models: object, problems: list[str]) -> dict[tuple[str, str], Footprint]:
    if not isinstance(models, dict):
        problems.append('"models" must be an object of model names')
        return {}
    out = {}
    for model, devices in models.items():
        if not isinstance(devices, dict):
            problems.append(f"models.{model} must be an object of device names")
            continue
        for device, entry in devices.items():
            footprint = _footprint(entry, f"models.{model}.{device}", problems)
            if footprint is not None:
                out[(model, device)] = footprint
    return out


def _footprint(entry: object, where: str, problems: list[str]) -> Footprint | None:
    if not isinstance(entry, dict):
        problems.append(f"{where} must be an object")
        return None
    wanted = {
        "needed_bytes": int,
        "precision": str,
        "checkpointing": bool,
        "optimizer": str,
        "micro_batch": int,
        "grad_accum": int,
    }
    bad = [
        key
        for key, kind in wanted.items()
        if not isinstance(entry.get(key), kind)
        or (kind is int and isinstance(entry.get(key), bool))
    ]
    if bad:
        problems.append(f"{where}: missing or mistyped {', '.join(bad)}")
        return None
    try:
        return Footprint(
            needed_bytes=entry["needed_bytes"],
            precision=parse_enum(Precision, "precision", entry["precision"]),
            checkpointing=entry["checkpointing"],
            optimizer=parse_enum(OptimizerKind, "optimizer", entry["optimizer"]),
            micro_batch=entry["micro_batch"],
            grad_accum=entry["grad_accum"],
        )
    except TrainfitError as exc:
        problems.append(f"{where}: {exc}")
        return None
