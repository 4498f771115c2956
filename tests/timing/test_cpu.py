"""The CPU step-time model on hand-made op costs and a hand-made calibration."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit.hardware.cpu_features import CpuFeatures, HalfSupport
from trainfit.plan.time_words import basis_text, slow_half_text
from trainfit.spec import TrainSpec
from trainfit.timing.cpu import (
    CpuCalibration,
    cpu_calibration,
    cpu_step_time,
    slow_half_precision,
    slow_half_precision_of,
)
from trainfit.timing.missing import RateMissing
from trainfit.trace.costs import OpCost, OpKind, StepCosts

FLAT = [[1.0, 1.0], [1e12, 1.0]]


def _curve(rate: float) -> list[list[float]]:
    return [[p, r * rate] for p, r in FLAT]


def _cal(**host: object) -> CpuCalibration:
    return CpuCalibration(
        host={
            "model": "Test CPU",
            "cores": 2,
            "threads": 2,
            "simd_lanes": 16,
            "clock_mhz": 2500.0,
            "peak_fp32_flops": 1e11,
        }
        | host,
        date="2026-11-26",
        versions={},
        source="test",
        load_average=[0.5, 0.5, 0.5],
        gemm_curve={"fp32": _curve(1e11), "native": _curve(2e11), "emulated": _curve(1e9)},
        memory_curve={"fp32": _curve(1e10), "bf16": _curve(5e9)},
        conv_source={},
        conv_curve={"fp32": {"forward": _curve(5e10), "backward": _curve(2.5e10)}},
        host_op_seconds=1e-6,
        module_call_seconds=2e-6,
        backward_op_seconds=1e-5,
        fitted_on=[],
    )


def _features(flags: str = "avx512f avx512_bf16", model: str = "Test CPU", clock=2000.0):
    return CpuFeatures(
        model=model, cores=2, threads=2, clock_mhz=clock, flags=frozenset(flags.split()),
        source="test",
    )  # fmt: skip


MM = OpCost(kind=OpKind.MATMUL, dtype="fp32", flops=10**9, bytes=10**6, kernels=1)
MM_BF16 = OpCost(kind=OpKind.MATMUL, dtype="bf16", flops=10**9, bytes=10**6, kernels=1)
ADD = OpCost(kind=OpKind.MEMORY, dtype="fp32", flops=0, bytes=10**8, kernels=1)
VIEW = OpCost(kind=OpKind.HOST, dtype="fp32", flops=0, bytes=0, kernels=0)
CALL = OpCost(kind=OpKind.MODULE, dtype="int", flops=0, bytes=0, kernels=0)


def _costs(matmul: OpCost = MM) -> StepCosts:
    return StepCosts(
        table=(matmul, ADD, VIEW, CALL),
        forward=(3, 0, 1, 2),
        backward=(0, 0, 1),
        optimizer=(1, 1),
    )


def test_each_op_is_timed_and_the_step_is_their_sum():
    step = cpu_step_time(_costs(), TrainSpec(device="cpu"), _features(), cal=_cal())
    mm, add, view, call, autograd = 1e9 / 1e11, 1e8 / 1e10, 1e-6, 2e-6, 1e-5
    assert step.forward_seconds == pytest.approx(call + mm + add + view)
    assert step.backward_seconds == pytest.approx(2 * mm + add + 3 * autograd)
    assert step.optimizer_seconds == pytest.approx(2 * add)
    assert step.seconds == pytest.approx(
        step.forward_seconds + step.backward_seconds + step.optimizer_seconds
    )
    assert "this CPU model; GEMMs over 2 threads" in basis_text(step.basis)


def test_accumulation_repeats_the_passes_not_the_optimizer():
    one = cpu_step_time(_costs(), TrainSpec(device="cpu"), _features(), cal=_cal())
    four = cpu_step_time(_costs(), TrainSpec(device="cpu", grad_accum=4), _features(), cal=_cal())
    passes = one.forward_seconds + one.backward_seconds
    assert four.seconds == pytest.approx(4 * passes + one.optimizer_seconds)


@pytest.mark.parametrize(
    ("flags", "rate"),
    [
        ("avx512f avx512_bf16", 2e11),  # native
        ("avx2 avx512f avx512bw avx512vl avx512dq", 1e11),  # converted: the fp32 rate
        ("avx2", 1e9),  # emulated
    ],
)
def test_a_bf16_matmul_runs_at_the_rate_of_its_class_on_this_cpu(flags, rate):
    features = _features(flags)
    same = {"simd_lanes": features.simd_lanes}
    step = cpu_step_time(_costs(MM_BF16), TrainSpec(device="cpu"), features, cal=_cal(**same))
    expected = 1e9 / rate
    assert step.optimizer_seconds == pytest.approx(2 * 1e8 / 1e10)
    assert step.forward_seconds == pytest.approx(2e-6 + expected + 1e8 / 1e10 + 1e-6)


def test_another_cpu_is_scaled_by_its_peak_and_one_without_a_clock_is_not_modelled():
    other = _features(model="Other CPU", clock=3125.0)  # peak 2 x 16 x 2 x 2 x 3.125 GHz
    step = cpu_step_time(_costs(), TrainSpec(device="cpu"), other, cal=_cal())
    scale = other.peak_fp32_flops / 1e11
    assert step.optimizer_seconds == pytest.approx(2 * 1e8 / 1e10)  # memory is not scaled
    assert step.forward_seconds == pytest.approx(2e-6 + 1e9 / (1e11 * scale) + 1e-2 + 1e-6)
    assert f"x{scale:.3g}" in basis_text(step.basis)
    # the emulated GEMM is scaled by the clock only
    slow = _features("avx2", model="Other CPU", clock=3125.0)
    half = cpu_step_time(_costs(MM_BF16), TrainSpec(device="cpu"), slow, cal=_cal())
    assert half.forward_seconds == pytest.approx(2e-6 + 1e9 / (1e9 * 1.25) + 1e-2 + 1e-6)
    with pytest.raises(RateMissing, match="clock could not be read"):
        cpu_step_time(_costs(), TrainSpec(device="cpu"), _features(model="X", clock=None),
                      cal=_cal())  # fmt: skip


def test_an_emulated_half_dtype_is_named_with_the_flags_it_lacks():
    laptop = _features("avx2 fma", model="Intel Core i7-8550U")
    found = slow_half_precision(_costs(MM_BF16), laptop, _cal(simd_lanes=8))
    assert [(s.dtype, s.support) for s in found] == [("bf16", HalfSupport.EMULATED)]
    assert found[0].slowdown == pytest.approx(100.0)  # fp32 1e11 over emulated 1e9
    words = slow_half_text(found[0])
    assert "bf16 on Intel Core i7-8550U is emulated" in words
    assert "avx512_bf16, amx_bf16" in words and "100x slower than fp32" in words
    assert slow_half_precision(_costs(), laptop, _cal()) == []  # an fp32 step: nothing to say


def test_the_shipped_calibration_has_every_class_and_dtype():
    cal = cpu_calibration()
    assert {"fp32", "native", "emulated"} <= set(cal.gemm_curve)
    assert {"fp32", "bf16"} <= set(cal.memory_curve)
    assert cal.fitted_on and cal.backward_op_seconds >= 0
    converted = slow_half_precision_of("bf16", _features("avx512bw avx512vl avx512dq"), cal)
    assert converted.support is HalfSupport.CONVERTED and converted.slowdown == 1.0


def test_more_threads_speed_up_gemms_but_not_the_one_thread_emulated_gemm():
    cal = _cal(threads=1)
    fp32 = cpu_step_time(_costs(), TrainSpec(device="cpu"), _features(), cal=cal)
    laptop = _features("avx512f", model="Test CPU")  # same model and lanes, no native bf16
    half = cpu_step_time(_costs(MM_BF16), TrainSpec(device="cpu"), laptop, cal=cal)
    rest = 2e-6 + 1e8 / 1e10 + 1e-6
    assert fp32.forward_seconds == pytest.approx(rest + 1e9 / (2 * 1e11))  # 2 threads
    assert half.forward_seconds == pytest.approx(rest + 1e9 / 1e9)  # one thread, as measured


def test_a_convolution_runs_at_the_convolution_rate_of_its_side_or_at_the_gemm_rate():
    conv = OpCost(kind=OpKind.CONV, dtype="fp32", flops=10**9, bytes=10**6, kernels=1)
    costs = StepCosts(table=(conv,), forward=(0,), backward=(0,), optimizer=())
    step = cpu_step_time(costs, TrainSpec(device="cpu"), _features(), cal=_cal())
    assert step.forward_seconds == pytest.approx(1e9 / 5e10)
    assert step.backward_seconds == pytest.approx(1e9 / 2.5e10 + 1e-5)
    half = dataclasses.replace(conv, dtype="bf16")  # no native conv curve: the GEMM rate
    costs = StepCosts(table=(half,), forward=(0,), backward=(), optimizer=())
    step = cpu_step_time(costs, TrainSpec(device="cpu"), _features(), cal=_cal())
    assert step.forward_seconds == pytest.approx(1e9 / 2e11)
