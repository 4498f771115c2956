"""Why there is no step time: a typed reason with the detail it takes, made into words by
`trainfit.plan.words` (the estimators, the multi-GPU search and the planner all give it)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class NoTime(str, Enum):
    """Why a device, or a run over several of it, has no step time."""

    CPU = "cpu"
    """Step times are planned for GPUs and Apple GPUs only."""
    NO_OP_COSTS = "no op costs"
    """The traced step has no op costs to time."""
    EMULATED_BF16 = "emulated bf16"
    """bf16 on a CUDA GPU without bf16 tensor cores (`NoStepTime.device`)."""
    CATALOG_LACKS = "catalog lacks"
    """The catalog lacks a figure of the device (`NoStepTime.detail` says which)."""
    NOT_MODELLED = "not modelled"
    """The timing model lacks something (`NoStepTime.detail` says what)."""
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
    detail: str = ""
    """What the catalog or the timing model lacks, as its error says."""
    device: str = ""
    """The device's display name (`NoTime.EMULATED_BF16`)."""
    gpus: int = 0
    """The run's GPU count (`NoTime.NO_GPU_COUNT`)."""
