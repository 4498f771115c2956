"""Why there is no step time: a typed reason with the detail it takes, made into words by
`trainfit.plan.time_words` (the estimators, the multi-GPU search and the planner all give it);
and the figure the timing model lacks (`RateLack`), the error that carries it (`RateMissing`)
and that error's words."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from trainfit.errors import SpecError


@dataclass(frozen=True, kw_only=True, slots=True)
class NoRate:
    """The catalog has no dense compute rate at `precision` for the device `device` names."""

    device: str
    precision: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NoBandwidth:
    """The catalog has no memory bandwidth for the device `device` names."""

    device: str


class CpuFigure(str, Enum):
    """A figure of the host CPU that scales the calibration host's GEMM rate."""

    CLOCK = "clock"
    SIMD_WIDTH = "simd width"


@dataclass(frozen=True, kw_only=True, slots=True)
class UnreadCpu:
    """The host CPU's `figure` could not be read (`source`: where the features came from)."""

    figure: CpuFigure
    source: str


RateLack = NoRate | NoBandwidth | UnreadCpu
"""A figure the timing model needs and lacks."""


def rate_lack_text(lack: RateLack) -> str:
    """What the timing model lacks, in words (the error's message, and the reports')."""
    if isinstance(lack, NoRate):
        return (
            f"the catalog has no {lack.precision} compute rate for {lack.device}: the vendor's "
            f"dense {lack.precision} rate would go in the device's row (a user catalog file, "
            "--catalog)"
        )
    if isinstance(lack, NoBandwidth):
        return f"the catalog has no memory bandwidth for {lack.device}"
    figure = {CpuFigure.CLOCK: "clock", CpuFigure.SIMD_WIDTH: "SIMD width"}[lack.figure]
    return (
        f"this CPU's {figure} could not be read ({lack.source}), so its GEMM rate cannot be "
        "scaled from the calibration host's"
    )


class RateMissing(Exception):
    """The catalog, or the host, lacks a figure the model needs for this device (`lack`)."""

    def __init__(self, lack: RateLack) -> None:
        self.lack = lack
        super().__init__(rate_lack_text(lack))


class NoTime(str, Enum):
    """Why a device, or a run over several of it, has no step time."""

    CPU = "cpu"
    """Step times are planned for GPUs and Apple GPUs only."""
    NO_OP_COSTS = "no op costs"
    """The traced step has no op costs to time."""
    EMULATED_BF16 = "emulated bf16"
    """bf16 on a CUDA GPU without bf16 tensor cores (`NoStepTime.device`)."""
    CATALOG_LACKS = "catalog lacks"
    """The catalog lacks a figure of the device (`NoStepTime.lack` says which)."""
    NOT_MODELLED = "not modelled"
    """The timing model lacks something (`NoStepTime.lack` or `.problems` says what)."""
    PROBES_DIFFER = "probes differ"
    """The batch probes ran different ops, so no line through them."""
    MULTI_GPU_NOT_CUDA = "multi-gpu not cuda"
    """A run over several GPUs, planned for CUDA GPUs only."""
    NO_GPU_COUNT = "no gpu count"
    """No step time for the run's GPU count (`NoStepTime.gpus`)."""
    NO_ESTIMATE = "no estimate"
    """A measured run without an estimate beside it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoStepTime:
    """Why there is no step time, with the detail the reason takes."""

    why: NoTime
    lack: RateLack | None = None
    """The figure the catalog or the timing model lacks."""
    problems: tuple[str, ...] = ()
    """Else, the problems of the spec that could not be timed, as its error lists them."""
    device: str = ""
    """The device's display name (`NoTime.EMULATED_BF16`)."""
    gpus: int = 0
    """The run's GPU count (`NoTime.NO_GPU_COUNT`)."""


def not_modelled(exc: RateMissing | SpecError) -> NoStepTime:
    """No step time because timing raised `exc`: the figure lacking, or the spec's problems."""
    if isinstance(exc, RateMissing):
        return NoStepTime(why=NoTime.NOT_MODELLED, lack=exc.lack)
    return NoStepTime(why=NoTime.NOT_MODELLED, problems=exc.problems)
