"""Target devices (data in devices.json, a source for every figure)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from trainfit.errors import UnknownNameError


@dataclass(frozen=True, kw_only=True, slots=True)
class Device:
    """A device trainfit can estimate for."""

    name: str
    display: str
    kind: str
    """"cuda" or "cpu"."""
    memory_bytes: int
    """Total device memory as the framework reports it (0: the host's RAM)."""
    compute_capability: tuple[int, int]
    architecture: str
    runtime_profile: str
    """Key of the runtime-context profile in trainfit.memory.runtime."""
    memory_source: str
    spec_source: str
    aliases: tuple[str, ...] = ()


def _normalise(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


@cache
def devices() -> dict[str, Device]:
    """All catalog devices by name."""
    text = resources.files("trainfit.hardware").joinpath("devices.json").read_text("utf-8")
    return {
        name: Device(
            name=name,
            display=row["display"],
            kind=row["kind"],
            memory_bytes=int(row["memory_bytes"]),
            compute_capability=(
                int(row["compute_capability"][0]),
                int(row["compute_capability"][1]),
            ),
            architecture=row["architecture"],
            runtime_profile=row["runtime_profile"],
            memory_source=row["memory_source"],
            spec_source=row["spec_source"],
            aliases=tuple(row.get("aliases", ())),
        )
        for name, row in json.loads(text).items()
    }


def get_device(name: str) -> Device:
    """The device called `name` (any common spelling); UnknownNameError with close matches."""
    wanted = _normalise(name)
    for device in devices().values():
        if wanted in {_normalise(device.name), *(_normalise(a) for a in device.aliases)}:
            return device
    raise UnknownNameError("device", name, devices(), hint="run `trainfit devices` for the list")
