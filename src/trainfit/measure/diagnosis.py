"""What `trainfit.measure.doctor.diagnose` found, as typed values (a `Diagnosis` of `Check`s and
`GpuReport`s), and how its checks read the probe (`read`) and record themselves (`CheckLog`);
as JSON and words: `trainfit.report.doctor`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from trainfit.hardware.probe import Probe, StepReading
from trainfit.measure.findings import Finding


class Status(str, Enum):
    """The outcome of one check. Only FAIL makes a diagnosis not ok."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    """One thing the doctor looked at."""

    name: str
    """What was checked: "torch", "cuda", "driver", "cuda:0 memory", "step cpu" ..."""
    status: Status
    found: Finding
    """What was found, with the numbers (its words and fix: `trainfit.report.doctor_words`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuReport:
    """One CUDA GPU as the doctor read it; None where a reading failed."""

    index: int
    name: str | None
    total_memory_bytes: int | None
    free_memory_bytes: int | None
    compute_capability: tuple[int, int] | None
    bf16: bool | None
    """Native bf16 (`torch.cuda.is_bf16_supported(including_emulation=False)`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Diagnosis:
    """Everything `diagnose` found: the readings, the steps run and the checks."""

    torch_version: str | None
    cuda_build: str | None
    """The CUDA version torch was built with (`torch.version.cuda`); None on a CPU-only build."""
    driver_version: str | None
    driver_cuda_version: str | None
    """The newest CUDA the driver supports ("13.0"), from NVML or nvidia-smi."""
    gpus: tuple[GpuReport, ...]
    mps_built: bool | None
    mps_available: bool | None
    mps_fallback: str | None
    """PYTORCH_ENABLE_MPS_FALLBACK as set in the environment, None when unset."""
    nccl_version: str | None
    steps: tuple[StepReading, ...]
    """The tiny training steps that returned (failed ones are only in `checks`)."""
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """No check failed (warnings and skips do not count)."""
        return all(c.status is not Status.FAIL for c in self.checks)

    def count(self, status: Status) -> int:
        """How many checks ended with `status`."""
        return sum(c.status is status for c in self.checks)


@dataclass(frozen=True, kw_only=True, slots=True)
class Reading:
    """A probe reading: its value, or the error it raised."""

    value: Any = None
    error: str | None = None


def read(fn: Callable[..., Any], *args: Any) -> Reading:
    # NB: the doctor's job is to report a broken environment, so any exception a reading
    # raises (RuntimeError from torch, OSError, an NVML or import error) becomes data.
    try:
        return Reading(value=fn(*args))
    except Exception as exc:
        return Reading(error=f"{type(exc).__name__}: {exc}")


def parse_version(text: str | None) -> tuple[int, int] | None:
    """ "12.8" -> (12, 8); None for None or text that is not MAJOR.MINOR."""
    if not text:
        return None
    major, _, rest = text.partition(".")
    minor = rest.split(".")[0]
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def version_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(kw_only=True)
class CheckLog:
    """The probe the checks read from, and the checks in the order they were made."""

    probe: Probe
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, status: Status, found: Finding) -> None:
        self.checks.append(Check(name=name, status=status, found=found))


__all__ = [
    "Check",
    "CheckLog",
    "Diagnosis",
    "GpuReport",
    "Reading",
    "Status",
    "parse_version",
    "read",
    "version_text",
]
