"""The step-time model's host floor, cuDNN's recurrent kernels and the loop's steady period."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit.hardware.catalog import get_device
from trainfit.spec import TrainSpec
from trainfit.timing.basis import BorrowedFit, FittedKernel
from trainfit.timing.constants import calibration
from trainfit.timing.families import matmul_efficiency
from trainfit.timing.host import step_host_costs
from trainfit.timing.kernels import interpolate_curve
from trainfit.timing.step import (
    BORROWED_FROM,
    Rates,
    step_time,
)
from trainfit.trace.costs import OpCost, OpKind, StepCosts
from trainfit.training import Phase


@pytest.mark.parametrize(
    ("gates", "hidden", "persistent"),
    [(4, 128, True), (4, 256, False), (3, 128, True), (1, 256, True), (1, 512, False)],
)
def test_cudnn_runs_a_small_recurrent_weight_in_its_persistent_kernel(
    gates: int, hidden: int, persistent: bool
) -> None:
    cal = calibration()
    rates = Rates(get_device("h100"), TrainSpec(model="gpt2"), cal)
    op = OpCost(OpKind.RNN, "fp32", 1, 8, 100, gates * hidden * hidden)
    size = "persistent" if persistent else "stepped"
    expected = 100 * cal.lstm_step_seconds[size]["forward"]
    assert rates.time(op, Phase.FORWARD).seconds == pytest.approx(expected)


def test_a_recurrent_call_waits_for_the_device() -> None:
    device, cal = get_device("h100"), calibration()
    spec = TrainSpec(model="gpt2", optimizer="sgd")
    copy = OpCost(OpKind.MEMORY, "fp32", 0, 4_000_000_000, 1, graph=True)
    rnn = OpCost(OpKind.RNN, "fp32", 1, 8, 100, 4 * 256 * 256, graph=True)
    costs = StepCosts(table=(copy, rnn), forward=(0, 1), backward=(), optimizer=())
    rates = Rates(device, spec, cal)
    device_work = sum(rates.time(op, Phase.FORWARD).seconds for op in (copy, rnn))
    hosts = step_host_costs(cal, [copy, rnn], Phase.FORWARD, 0.0)
    steady = step_time(costs, spec, device).seconds
    # overlapped, the period would be the busier side's; the call's set-up runs after the
    # copy instead, so the two sides add up
    assert hosts[1] > cal.host_fit.graph_op_seconds
    assert steady == pytest.approx(device_work + hosts[1], rel=0.01)
    assert steady > max(device_work, sum(hosts)) * 1.01


def _copies(ops: int, nbytes: int) -> StepCosts:
    """A step of `ops` forward copies of `nbytes` each and as many backward ones."""
    table = (OpCost(OpKind.MEMORY, "fp32", 0, nbytes, 1, graph=True),)
    return StepCosts(table=table, forward=(0,) * ops, backward=(0,) * ops, optimizer=())


@pytest.mark.parametrize("nbytes", [1_000, 400_000_000])
def test_a_loop_without_syncs_overlaps_the_host_with_the_device(nbytes: int) -> None:
    device, cal = get_device("h100"), calibration()
    spec = TrainSpec(model="gpt2", optimizer="sgd")
    costs = _copies(50, nbytes)
    fit = cal.host_fit
    host = (
        fit.step_seconds + fit.pass_seconds + 50 * (fit.graph_op_seconds + fit.backward_op_seconds)
    )
    kernels = 100 * Rates(device, spec, cal).time(costs.table[0], Phase.FORWARD).seconds
    synced = step_time(costs, spec, device, synced_loop=True)
    steady = step_time(costs, spec, device)
    # the steady period is the busier side's work; the synced step adds the other's start
    assert steady.seconds == pytest.approx(max(host, kernels), rel=0.01)
    assert synced.seconds > steady.seconds
    assert (steady.host_bound_share > 0.5) is (host > kernels)


def _ops(*table: OpCost) -> StepCosts:
    """One forward of each op in `table`, no backward or optimizer."""
    return StepCosts(table=table, forward=tuple(range(len(table))), backward=(), optimizer=())


def test_a_precision_the_calibration_has_no_fit_for_borrows_bf16s_and_says_so() -> None:
    cal = calibration()
    attention = OpCost(OpKind.ATTENTION, "fp32", 10**9, 10**6, 1)
    conv = OpCost(OpKind.CONV, "fp32", 10**9, 10**6, 1)  # fp32: no TF32 on a V100
    assert "fp32" not in cal.attention_efficiency and "fp32" not in cal.conv_fit
    step = step_time(
        _ops(attention, conv, attention), TrainSpec(model="m"), get_device("v100-16gb")
    )
    assert step.notes[-2:] == (
        BorrowedFit(
            kernel=FittedKernel.ATTENTION,
            precision="fp32",
            borrowed=BORROWED_FROM,
            calibration_device=cal.device,
        ),
        BorrowedFit(
            kernel=FittedKernel.CONV,
            precision="fp32",
            borrowed=BORROWED_FROM,
            calibration_device=cal.device,
        ),
    )
    # the borrowed efficiency at fp32's own peak rate
    rates = Rates(get_device("v100-16gb"), TrainSpec(model="m"), cal)
    peak = rates.peak("fp32")
    expected = 10**9 / (peak * cal.attention_efficiency[BORROWED_FROM]) + cal.kernel_seconds
    assert rates.time(attention, Phase.FORWARD).seconds == pytest.approx(expected)


def test_a_precision_the_calibration_fits_borrows_nothing() -> None:
    attention = OpCost(OpKind.ATTENTION, "bf16", 10**9, 10**6, 1)
    conv = OpCost(OpKind.CONV, "fp32", 10**9, 10**6, 1)  # tf32 on an H100
    step = step_time(_ops(attention, conv), TrainSpec(model="m"), get_device("h100"))
    assert not any(isinstance(n, BorrowedFit) for n in step.notes)


def _matmul_seconds(device: str, precision: str, dtype: str) -> float:
    spec = TrainSpec(model="mlp-tiny", batch=8, precision=precision, device=device)
    rates = Rates(get_device(device), spec, calibration())
    op = OpCost(kind=OpKind.MATMUL, dtype=dtype, flops=2 * 512**3, bytes=3 * 4 * 512**2, kernels=1)
    return rates.time(op, Phase.FORWARD).seconds


def test_a_matmuls_fixed_cost_is_a_time_not_flops_at_the_cards_rate() -> None:
    cal = calibration()
    # NB: the RTX 4060's TF32 rate is its FP32 rate: a fixed cost in FLOPs at the TF32 rate
    # would be ~10x the FP32 one (the calibration GPU's tensor cores run TF32 7x faster)
    tf32 = _matmul_seconds("rtx-4060", "tf32", "fp32")
    fp32 = _matmul_seconds("rtx-4060", "fp32", "fp32")
    flops = 2 * 512**3
    peak = 15.11e12
    own = matmul_efficiency("rtx-4060")
    assert own is not None
    assert tf32 == pytest.approx(
        flops / (peak * own.get("tf32")) + cal.matmul_fixed_seconds["tf32"] + cal.kernel_seconds
    )
    # the FLOPs form gave 12x fp32's time here; what is left is the family's two efficiencies
    # (read off published GEMMs) and the two fixed times (read on the calibration GPU)
    assert tf32 / fp32 < 1.3
    # on the calibration GPU the time is what the FLOPs form gave (its committed tables hold)
    h100 = _matmul_seconds("h100", "bf16", "bf16")
    old_fixed_flops = 5511324735  # the FLOPs form's bf16 constant, as calibrate.py wrote it
    eff = cal.matmul_efficiency["bf16"]
    assert h100 == pytest.approx((flops + old_fixed_flops) / (989.4e12 * eff) + cal.kernel_seconds)


def test_an_apple_gpu_pays_one_fixed_cost_in_every_precision() -> None:
    fp16 = _matmul_seconds("m4-pro-24gb", "fp16", "fp16")
    fp32 = _matmul_seconds("m4-pro-24gb", "fp32", "fp32")
    # the M4 Pro's fp16 and fp32 rates are one figure in the catalog: one fixed cost, and the
    # fp16 matmul differs only by the calibration's efficiencies
    cal = calibration()
    ratio = cal.matmul_efficiency["fp32"] / cal.matmul_efficiency["fp16"]
    assert fp16 > fp32 * 0.9
    assert fp16 < fp32 * max(ratio, 1.0) * 1.01


def _rates(precision: str) -> Rates:
    return Rates(get_device("h100"), TrainSpec(model="gpt2", precision=precision), calibration())


def test_a_convolution_with_few_channels_runs_slower_than_the_fit_says() -> None:
    rates, cal = _rates("fp16"), calibration()
    for side, gradient in (("forward", False), ("backward", True)):
        wide = OpCost(OpKind.CONV, "fp16", 10**10, 10**8, 1, detail=0, gradient=gradient)
        narrow = dataclasses.replace(wide, detail=12)
        at_end = dataclasses.replace(wide, detail=4096)
        fit = rates.time(wide, Phase.FORWARD).seconds
        assert rates.time(at_end, Phase.FORWARD).seconds == fit
        factor = interpolate_curve(cal.conv_channel_curve["half"][side], 12)
        assert factor > 1
        assert rates.time(narrow, Phase.FORWARD).seconds == pytest.approx(fit * factor)
    forward = OpCost(OpKind.CONV, "fp16", 10**10, 10**8, 1, detail=12)
    gradient = dataclasses.replace(forward, gradient=True)
    assert rates.time(gradient, Phase.BACKWARD).seconds > rates.time(forward, Phase.FORWARD).seconds


def test_a_forward_recomputed_under_checkpointing_takes_the_forwards_factors() -> None:
    # NB: the cuDNN rules follow the op, not the step's phase: a checkpointed block's
    # convolutions and batch norms run again in the backward with the forward's kernels
    rates = _rates("fp16")
    for kind, detail in ((OpKind.CONV, 12), (OpKind.NORM, 64)):
        forward = OpCost(kind, "fp16", 10**10, 10**8, 1, detail=detail)
        gradient = dataclasses.replace(forward, gradient=True)
        recomputed = rates.time(forward, Phase.BACKWARD)
        assert recomputed == rates.time(forward, Phase.FORWARD)
        assert recomputed != rates.time(gradient, Phase.BACKWARD)


def test_an_fp16_batch_norm_takes_its_measured_share_of_the_fp32_time() -> None:
    cal = calibration()
    rates = _rates("fp16")
    for side, gradient in (("forward", False), ("backward", True)):
        fp16 = OpCost(OpKind.NORM, "fp16", 0, 10**8, 1, detail=64, gradient=gradient)
        fp32 = dataclasses.replace(fp16, dtype="fp32", bytes=2 * 10**8)
        kernel = cal.kernel_seconds
        ratio = (rates.time(fp16, Phase.FORWARD).seconds - kernel) / (
            rates.time(fp32, Phase.FORWARD).seconds - kernel
        )
        assert ratio == pytest.approx(cal.norm_fp16_time_over_fp32[side])


def test_a_fitted_familys_device_keeps_the_model_its_factors_were_fitted_on() -> None:
    # rtx-4060 is in a family with factors fitted on public runs; the H100 is the calibration's
    narrow = OpCost(OpKind.CONV, "fp16", 10**10, 10**8, 1, detail=12, gradient=True)
    plain = dataclasses.replace(narrow, detail=0)
    spec = TrainSpec(model="gpt2", precision="fp16")
    fitted = Rates(get_device("rtx-4060"), spec, calibration())
    own = Rates(get_device("h100"), spec, calibration())
    assert not fitted.cudnn_rules and own.cudnn_rules
    assert fitted.time(narrow, Phase.BACKWARD) == fitted.time(plain, Phase.BACKWARD)
    assert own.time(narrow, Phase.BACKWARD).seconds > own.time(plain, Phase.BACKWARD).seconds


@pytest.mark.parametrize(
    ("device", "sms"),
    [
        ("h100", 132),
        ("rtx-5090", 170),
        ("h200", 132),
        ("h100-pcie", 0),
        ("a100-80gb", 0),
        ("rtx-4090", 0),
    ],
)
def test_the_attention_curves_apply_where_the_cudnn_rules_do_and_the_sms_are_known(
    device: str, sms: int
) -> None:
    # NB: the H200's row has no SM count; the A100 and the RTX 4090 are of fitted families
    from trainfit.trace.costs import AttentionShape

    rates = Rates(get_device(device), TrainSpec(model="gpt2", precision="bf16"), calibration())
    assert rates.attention_sms == sms
    shape = AttentionShape(12, 1024, 64, causal=True, dropout=False, backward=False, keys=1024)
    fused = OpCost(OpKind.ATTENTION, "bf16", 10**10, 10**7, 1, attention=shape)
    plain = dataclasses.replace(fused, attention=None)
    ratio = rates.time(fused, Phase.FORWARD).seconds / rates.time(plain, Phase.FORWARD).seconds
    assert (ratio == 1.0) is (sms == 0)
