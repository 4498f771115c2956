"""A step time in words and as JSON: the one place its typed basis and notes
(`trainfit.timing.basis`) and the reasons for no step time (`trainfit.timing.missing`) become
sentences, for the plan's words, the estimate's JSON and the reports."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainfit.hardware.cpu_features import CONVERTING_FLAGS, HalfSupport
from trainfit.timing.basis import (
    AppleUnchecked,
    Basis,
    BlindChecked,
    BorrowedFit,
    CpuBasis,
    FamilyChecked,
    FamilyFactors,
    FittedKernel,
    MeasuredBasis,
    SlowHalfPrecision,
    TimeNote,
)
from trainfit.timing.checks import without_blind_check
from trainfit.timing.missing import NoStepTime, NoTime, rate_lack_text
from trainfit.timing.step import StepTime

_CLASS_WORDS = {
    "conv": "convolutions",
    "gemm": "matrix multiplies",
    "memory": "memory-bound kernels",
}


_FITTED_WORDS = {
    FittedKernel.CONV: ("convolutions", "fit (efficiencies and fixed cost)"),
    FittedKernel.ATTENTION: ("attention kernels", "efficiency"),
}


def no_time_text(gap: NoStepTime) -> str:
    """Why there is no step time, in words."""
    return {
        NoTime.CPU: "step time not modelled on the CPU (GPUs and Apple GPUs only)",
        NoTime.NO_OP_COSTS: "step time not modelled: the traced step's op costs are missing",
        NoTime.EMULATED_BF16: (
            f"step time not modelled: bf16 on {gap.device} is emulated (no bf16 tensor "
            "cores); fp16 is native there"
        ),
        NoTime.CATALOG_LACKS: (
            f"step time not modelled: {_lacking(gap)} (add it in a user catalog file)"
        ),
        NoTime.NOT_MODELLED: f"step time not modelled: {_lacking(gap)}",
        NoTime.PROBES_DIFFER: "step time not modelled: the probes' ops differ between batch sizes",
        NoTime.MULTI_GPU_NOT_CUDA: "runs over several GPUs are planned for CUDA GPUs only",
        NoTime.NO_GPU_COUNT: f"no step time for {gap.gpus} GPUs",
        NoTime.NO_ESTIMATE: "no estimate beside the run",
    }[gap.why]


def _lacking(gap: NoStepTime) -> str:
    """What the timing model lacks: a figure, or the spec's problems as its error lists them."""
    return "; ".join(gap.problems) if gap.lack is None else rate_lack_text(gap.lack)


def basis_text(basis: Basis) -> str:
    """Where a step time comes from, in words."""
    if isinstance(basis, MeasuredBasis):
        return _measured(basis)
    if isinstance(basis, CpuBasis):
        return _cpu(basis)
    if basis.calibrated_here:
        text = (
            "per-op roofline with efficiencies measured on this GPU model "
            f"({basis.calibration_device}, {basis.calibration_date})"
        )
    else:
        text = (
            f"per-op roofline: {basis.device}'s catalog rates, efficiencies measured "
            f"on an {basis.calibration_device} ({basis.calibration_date})"
        )
    return text + ("" if basis.family is None else _family(basis.family))


def _family(fit: FamilyFactors) -> str:
    classes = "".join(f", {_CLASS_WORDS[c]} a further x{f:.3g}" for c, f in fit.class_factors)
    return (
        f", kernel times x{fit.factor:.3g}{classes} fitted on {fit.rows} public {fit.family} "
        f"training measurements ({fit.date})"
    )


def _measured(basis: MeasuredBasis) -> str:
    if basis.ratio is None:
        return f"measured: {basis.seconds:.4g} s per step on {basis.on}"
    stage = f" for the last stage ({basis.stage})" if basis.stage else ""
    return (
        f"{basis.seconds:.4g} s measured on {basis.on}{stage}, scaled by the modelled ratio "
        f"{basis.ratio:.3g}"
    )


def _cpu(basis: CpuBasis) -> str:
    measured = f"per-op times from one-thread microbenchmarks on an {basis.host} ({basis.date})"
    if basis.same_cpu:
        return f"{measured}, this CPU model; GEMMs over {basis.threads} threads"
    return (
        f"{measured}; GEMM rates x{basis.gemm_scale:.3g}, the ratio of this CPU's peak fp32 "
        f"FLOP/s ({basis.threads} threads x {basis.simd_lanes} lanes x {basis.clock_mhz:.0f} "
        "MHz) to that host's"
    )


def time_note_text(note: TimeNote) -> str:
    """What a step time can be trusted to, in words."""
    if isinstance(note, AppleUnchecked):
        return "Apple GPU: the efficiencies are an NVIDIA GPU's; not checked on a Mac"
    if isinstance(note, FamilyChecked):
        rows = note.rows
        errors = (
            f"error {note.median_error:.0%}"
            if rows == 1
            else f"median error {note.median_error:.0%}, worst {note.worst_error:.0%}"
        )
        return (
            f"{'Apple GPU: ' if note.apple else ''}{note.family} step times checked on {rows} "
            f"held-out public measurement{'s' if rows > 1 else ''}: {errors}"
        )
    if isinstance(note, BlindChecked):
        check = note.check
        steps = _count(check.steps, "single-GPU training step")
        sizes = (
            f"models up to {_parameters(check.largest_parameters)} parameters, up to "
            f"{_parameters(check.largest_trained)} trained"
        )
        return (
            f"{note.device} step times checked blind on {steps} ({sizes}) timed after they "
            f"were predicted ({_count(len(check.sets), 'set')}, {', '.join(check.measured)}): "
            f"median error {check.median_error:.1%}, worst {check.worst_error:+.1%}, "
            f"{check.within_20_percent} of {check.steps} within 20%, {check.under} predicted "
            "too fast; host-bound steps vary most between machines"
        )
    if isinstance(note, BorrowedFit):
        return borrowed_text(note)
    return slow_half_text(note)


def borrowed_text(note: BorrowedFit) -> str:
    """Kernels timed with another precision's fit, in words."""
    kernels, fit = _FITTED_WORDS[note.kernel]
    return (
        f"{note.precision} {kernels} timed with the {note.borrowed} {fit} measured on the "
        f"{note.calibration_device} at the {note.precision} peak rate: the calibration has "
        f"no {note.precision} one"
    )


def slow_half_text(slow: SlowHalfPrecision) -> str:
    """A half dtype this CPU does not run natively, in words."""
    flags = ", ".join(slow.missing_flags)
    if slow.support is HalfSupport.CONVERTED:
        return (
            f"{slow.dtype} on {slow.cpu} is converted to fp32 (none of the CPU flags "
            f"{flags}; it has {', '.join(CONVERTING_FLAGS)}): no faster than fp32"
        )
    return (
        f"{slow.dtype} on {slow.cpu} is emulated (none of the CPU flags {flags}): its "
        f"matmuls run about {slow.slowdown:.0f}x slower than fp32; train in fp32 here"
    )


def notes_by_device(
    steps: Iterable[tuple[str, StepTime | None]], one_gpu: bool = True
) -> list[str]:
    """Each note of the devices' step times once, after the devices it is of ("h100,
    a100-80gb: ..."); without `one_gpu` (a data-parallel step over several GPUs) the one-GPU
    blind check is left out."""
    devices: dict[str, list[str]] = {}
    for device, step in steps:
        if step is not None:
            notes = step.notes if one_gpu else without_blind_check(step.notes)
            for note in notes:
                devices.setdefault(time_note_text(note), []).append(device)
    return [f"{', '.join(names)}: {text}" for text, names in devices.items()]


def _parameters(n: int) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def step_time_dict(t: StepTime) -> dict[str, Any]:
    """A step time as JSON (basis and notes in words)."""
    return {
        "device": t.device,
        "micro_batch": t.micro_batch,
        "grad_accum": t.grad_accum,
        "step_seconds": round(t.seconds, 6),
        "forward_seconds": round(t.forward_seconds, 6),
        "backward_seconds": round(t.backward_seconds, 6),
        "optimizer_seconds": round(t.optimizer_seconds, 6),
        "samples_per_second": round(t.samples_per_second, 3),
        "tokens_per_second": (
            None if t.tokens_per_second is None else round(t.tokens_per_second, 1)
        ),
        "flops_per_step": t.flops_per_step,
        "compute_bound_share": round(t.compute_bound_share, 3),
        "memory_bound_share": round(t.memory_bound_share, 3),
        "host_bound_share": round(t.host_bound_share, 3),
        "label": t.label.value,
        "basis": basis_text(t.basis),
        "notes": [time_note_text(n) for n in t.notes],
    }
