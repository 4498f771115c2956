"""Where a step time comes from and what it can be trusted to, as typed facts: a step time's
`basis` and `notes` (`trainfit.timing.step.StepTime`). `trainfit.plan.words` puts them in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from trainfit.hardware.cpu_features import HalfSupport


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyFactors:
    """A device family's kernel-time factors, fitted on public training measurements."""

    family: str
    factor: float
    """Every kernel's modelled time times this."""
    class_factors: tuple[tuple[str, float], ...]
    """A further factor per op class ("conv", "gemm", "memory"), in `OP_CLASSES` order."""
    rows: int
    """How many published measurements the factors were fitted on."""
    date: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RooflineBasis:
    """A GPU or Apple GPU step time modelled by the per-op roofline."""

    device: str
    """The device's display name."""
    calibrated_here: bool
    """The efficiencies were measured on this GPU model (else on `calibration_device`)."""
    calibration_device: str
    calibration_date: str
    family: FamilyFactors | None
    """The device family's fitted factors (None: Hopper, or a device of no family)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuBasis:
    """A CPU step time modelled from one-thread microbenchmarks."""

    host: str
    """The calibration host's CPU model."""
    date: str
    same_cpu: bool
    """This CPU is the calibration host's model (its GEMMs split over `threads`)."""
    threads: int
    gemm_scale: float
    """Another CPU: its peak fp32 FLOP/s over the calibration host's."""
    simd_lanes: int
    clock_mhz: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasuredBasis:
    """A modelled step time scaled by a measured step."""

    seconds: float
    """The measured step."""
    on: str
    """The device it was measured on."""
    ratio: float | None
    """This time's modelled seconds over those of the measured step's (None: measured on
    this device with this setting)."""
    stage: str = ""
    """The stage the measured step is of, when this time is another stage's."""


Basis = RooflineBasis | CpuBasis | MeasuredBasis


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyChecked:
    """The device family's step times checked on held-out public measurements."""

    family: str
    rows: int
    median_error: float
    worst_error: float
    apple: bool
    """An Apple GPU's family."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BlindCheck:
    """The step-time rules' blind check on one GPU (`blind_check.json`, made by
    benchmarks/steptime/checked.py from the committed predictions and timed runs)."""

    device: str
    """The catalog row of the GPU the steps were timed on."""
    sets: tuple[str, ...]
    """The blind sets whose committed predictions these rules made (empty: none yet)."""
    steps: int
    median_error: float | None
    """Median |predicted / measured - 1| (None: no set yet)."""
    worst_error: float | None
    """The error furthest from 0, signed (None: no set yet)."""
    within_20_percent: int
    under: int
    """How many steps were predicted faster than they ran."""
    largest_parameters: int
    """The most parameters of a checked step's model (a DPO reference's included)."""
    largest_trained: int
    """The most parameters a checked step trains."""
    measured: tuple[str, ...]
    """The dates the sets were timed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BlindChecked:
    """Step times of this GPU (the calibration's model) checked blind: steps predicted by these
    rules, committed, then timed on the GPU (`check`, with at least one set)."""

    device: str
    """The GPU's display name."""
    check: BlindCheck


@dataclass(frozen=True, kw_only=True, slots=True)
class AppleUnchecked:
    """An Apple GPU's step time on an NVIDIA GPU's efficiencies, not checked on a Mac."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SlowHalfPrecision:
    """A half dtype whose matmuls this CPU does not run natively."""

    dtype: str
    support: HalfSupport
    """CONVERTED or EMULATED."""
    cpu: str
    missing_flags: tuple[str, ...]
    """The flags any one of which would make it native."""
    slowdown: float
    """fp32 GEMM rate over this dtype's, at a 10^8-FLOP GEMM (calibration curves)."""


class FittedKernel(str, Enum):
    """A kernel class whose calibration is a fit per precision (`calibration.json`)."""

    CONV = "conv"
    """A convolution (`conv_fit`: compute and memory efficiency, fixed seconds)."""
    ATTENTION = "attention"
    """A fused attention kernel (`attention_efficiency`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BorrowedFit:
    """Kernels at a precision the calibration has no fit for, timed with another precision's
    fit at their own precision's peak rate (`trainfit.timing.step.BORROWED_FROM`)."""

    kernel: FittedKernel
    precision: str
    """The precision the kernels compute at (its peak rate is used)."""
    borrowed: str
    """The precision whose fitted efficiencies stand in."""
    calibration_device: str


TimeNote = FamilyChecked | BlindChecked | AppleUnchecked | SlowHalfPrecision | BorrowedFit
