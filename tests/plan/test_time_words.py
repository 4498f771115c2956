"""The step time's typed basis, notes and missing-time reasons in words (exact strings)."""

from __future__ import annotations

import pytest

from trainfit.hardware.catalog import get_device
from trainfit.hardware.cpu_features import HalfSupport
from trainfit.plan.time_words import basis_text, no_time_text, notes_by_device, time_note_text
from trainfit.spec import TrainSpec
from trainfit.timing.basis import (
    AppleUnchecked,
    BorrowedFit,
    CpuBasis,
    FamilyChecked,
    FamilyFactors,
    FittedKernel,
    MeasuredBasis,
    RooflineBasis,
    SlowHalfPrecision,
)
from trainfit.timing.missing import (
    CpuFigure,
    NoBandwidth,
    NoRate,
    NoStepTime,
    NoTime,
    UnreadCpu,
)
from trainfit.timing.step import step_time
from trainfit.trace.costs import OpCost, OpKind, StepCosts

_ROOFLINE = RooflineBasis(
    device="GPU X",
    calibrated_here=False,
    calibration_device="NVIDIA H100",
    calibration_date="2026-01-02",
    family=None,
)


def test_every_reason_for_no_step_time_has_words() -> None:
    gap = {
        NoTime.CPU: NoStepTime(why=NoTime.CPU),
        NoTime.NO_OP_COSTS: NoStepTime(why=NoTime.NO_OP_COSTS),
        NoTime.EMULATED_BF16: NoStepTime(why=NoTime.EMULATED_BF16, device="NVIDIA T4"),
        NoTime.CATALOG_LACKS: NoStepTime(
            why=NoTime.CATALOG_LACKS, lack=NoRate(device="GPU X", precision="bf16")
        ),
        NoTime.NOT_MODELLED: NoStepTime(
            why=NoTime.NOT_MODELLED,
            lack=UnreadCpu(figure=CpuFigure.CLOCK, source="/proc/cpuinfo"),
        ),
        NoTime.PROBES_DIFFER: NoStepTime(why=NoTime.PROBES_DIFFER),
        NoTime.MULTI_GPU_NOT_CUDA: NoStepTime(why=NoTime.MULTI_GPU_NOT_CUDA),
        NoTime.NO_GPU_COUNT: NoStepTime(why=NoTime.NO_GPU_COUNT, gpus=3),
        NoTime.NO_ESTIMATE: NoStepTime(why=NoTime.NO_ESTIMATE),
    }
    assert set(gap) == set(NoTime)
    assert no_time_text(gap[NoTime.EMULATED_BF16]) == (
        "step time not modelled: bf16 on NVIDIA T4 is emulated (no bf16 tensor cores); fp16 is "
        "native there"
    )
    assert no_time_text(gap[NoTime.CATALOG_LACKS]) == (
        "step time not modelled: the catalog has no bf16 compute rate for GPU X: the vendor's "
        "dense bf16 rate would go in the device's row (a user catalog file, --catalog) (add it "
        "in a user catalog file)"
    )
    assert no_time_text(gap[NoTime.NOT_MODELLED]) == (
        "step time not modelled: this CPU's clock could not be read (/proc/cpuinfo), so its "
        "GEMM rate cannot be scaled from the calibration host's"
    )
    assert no_time_text(gap[NoTime.NO_GPU_COUNT]) == "no step time for 3 GPUs"
    assert all(no_time_text(g) for g in gap.values())


def test_what_the_timing_model_lacks_in_words() -> None:
    bandwidth = NoStepTime(why=NoTime.CATALOG_LACKS, lack=NoBandwidth(device="GPU X"))
    simd = UnreadCpu(figure=CpuFigure.SIMD_WIDTH, source="sysctl")
    spec = NoStepTime(why=NoTime.NOT_MODELLED, problems=("batch must be positive", "no model"))
    assert no_time_text(bandwidth) == (
        "step time not modelled: the catalog has no memory bandwidth for GPU X (add it in a "
        "user catalog file)"
    )
    assert no_time_text(NoStepTime(why=NoTime.NOT_MODELLED, lack=simd)) == (
        "step time not modelled: this CPU's SIMD width could not be read (sysctl), so its "
        "GEMM rate cannot be scaled from the calibration host's"
    )
    assert no_time_text(spec) == "step time not modelled: batch must be positive; no model"


def test_a_roofline_basis_names_the_calibration_and_the_family_factors() -> None:
    assert basis_text(_ROOFLINE) == (
        "per-op roofline: GPU X's catalog rates, efficiencies measured on an NVIDIA H100 "
        "(2026-01-02)"
    )
    here = RooflineBasis(
        device="NVIDIA H100",
        calibrated_here=True,
        calibration_device="NVIDIA H100",
        calibration_date="2026-01-02",
        family=FamilyFactors(
            family="ada",
            factor=0.8,
            class_factors=(("conv", 0.5), ("memory", 1.25)),
            rows=4,
            date="2026-01-03",
        ),
    )
    assert basis_text(here) == (
        "per-op roofline with efficiencies measured on this GPU model (NVIDIA H100, "
        "2026-01-02), kernel times x0.8, convolutions a further x0.5, memory-bound kernels a "
        "further x1.25 fitted on 4 public ada training measurements (2026-01-03)"
    )


@pytest.mark.parametrize(
    ("basis", "words"),
    [
        (MeasuredBasis(seconds=0.5, on="h100", ratio=None), "measured: 0.5 s per step on h100"),
        (
            MeasuredBasis(seconds=0.5, on="h100", ratio=2.0),
            "0.5 s measured on h100, scaled by the modelled ratio 2",
        ),
        (
            MeasuredBasis(seconds=0.5, on="h100", ratio=2.0, stage="sft"),
            "0.5 s measured on h100 for the last stage (sft), scaled by the modelled ratio 2",
        ),
    ],
)
def test_a_measured_basis(basis: MeasuredBasis, words: str) -> None:
    assert basis_text(basis) == words


def test_a_cpu_basis_on_the_calibration_host_and_on_another() -> None:
    same = CpuBasis(
        host="AMD EPYC", date="2026-01-02", same_cpu=True, threads=2, gemm_scale=2.0,
        simd_lanes=16, clock_mhz=None,
    )  # fmt: skip
    assert basis_text(same) == (
        "per-op times from one-thread microbenchmarks on an AMD EPYC (2026-01-02), this CPU "
        "model; GEMMs over 2 threads"
    )
    other = CpuBasis(
        host="AMD EPYC", date="2026-01-02", same_cpu=False, threads=8, gemm_scale=1.5,
        simd_lanes=8, clock_mhz=3000.0,
    )  # fmt: skip
    assert basis_text(other) == (
        "per-op times from one-thread microbenchmarks on an AMD EPYC (2026-01-02); GEMM rates "
        "x1.5, the ratio of this CPU's peak fp32 FLOP/s (8 threads x 8 lanes x 3000 MHz) to "
        "that host's"
    )


def test_the_notes_of_a_step_time() -> None:
    assert time_note_text(AppleUnchecked()) == (
        "Apple GPU: the efficiencies are an NVIDIA GPU's; not checked on a Mac"
    )
    one = FamilyChecked(family="ada", rows=1, median_error=0.08, worst_error=0.08, apple=False)
    assert time_note_text(one) == (
        "ada step times checked on 1 held-out public measurement: error 8%"
    )
    many = FamilyChecked(family="m", rows=6, median_error=0.1, worst_error=0.3, apple=True)
    assert time_note_text(many) == (
        "Apple GPU: m step times checked on 6 held-out public measurements: median error 10%, "
        "worst 30%"
    )
    slow = SlowHalfPrecision(
        dtype="bf16", support=HalfSupport.CONVERTED, cpu="CPU Y", missing_flags=("a", "b"),
        slowdown=1.0,
    )  # fmt: skip
    assert time_note_text(slow).startswith(
        "bf16 on CPU Y is converted to fp32 (none of the CPU flags a, b; it has "
    )


def test_a_borrowed_fit_names_the_kernels_both_precisions_and_the_calibration() -> None:
    conv = BorrowedFit(
        kernel=FittedKernel.CONV, precision="fp32", borrowed="bf16", calibration_device="GPU Z"
    )
    assert time_note_text(conv) == (
        "fp32 convolutions timed with the bf16 fit (efficiencies and fixed cost) measured on "
        "the GPU Z at the fp32 peak rate: the calibration has no fp32 one"
    )
    attention = BorrowedFit(
        kernel=FittedKernel.ATTENTION, precision="tf32", borrowed="bf16", calibration_device="Z"
    )
    assert time_note_text(attention) == (
        "tf32 attention kernels timed with the bf16 efficiency measured on the Z at the tf32 "
        "peak rate: the calibration has no tf32 one"
    )


def test_each_step_time_note_is_said_once_with_its_devices() -> None:
    table = (OpCost(OpKind.MEMORY, "fp32", 0, 1_000_000, 1, graph=True),)
    costs = StepCosts(table=table, forward=(0,), backward=(0,), optimizer=())
    spec = TrainSpec(model="m")
    steps = [(name, step_time(costs, spec, get_device(name))) for name in ("h100", "a100-80gb")]
    steps += [("a100-40gb", step_time(costs, spec, get_device("a100-40gb"))), ("t4", None)]
    lines = notes_by_device(steps)
    assert [line.split(": ", 1)[0] for line in lines] == ["h100", "a100-80gb, a100-40gb"]
    assert "checked blind" in lines[0] and "held-out public" in lines[1]
    assert notes_by_device(steps, one_gpu=False) == lines[1:]
