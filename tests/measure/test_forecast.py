"""What `trainfit measure` says before a run: the predicted time, the long-run warning and
the half-precision warning on a CPU without native support; and each step as it completes."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit.cli.main import main
from trainfit.hardware.catalog import DeviceKind
from trainfit.hardware.cpu_features import CpuFeatures
from trainfit.measure.forecast import LONG_RUN_SECONDS, forecast
from trainfit.measure.steps import StepDone
from trainfit.report.measure import forecast_lines, step_line
from trainfit.spec import Precision
from trainfit.timing.basis import MeasuredBasis
from trainfit.timing.missing import NoStepTime
from trainfit.timing.step import StepTime, TimeLabel

LAPTOP = CpuFeatures(
    model="Intel(R) Core(TM) i7-8550U", cores=4, threads=4, clock_mhz=1800.0,
    flags=frozenset({"avx", "avx2", "fma"}), source="/proc/cpuinfo",
)  # fmt: skip
SAPPHIRE = dataclasses.replace(
    LAPTOP, model="Xeon 8480+", flags=frozenset({"avx512f", "amx_bf16", "avx512_fp16"})
)


def _step(seconds: float) -> StepTime:
    return StepTime(
        device="cpu", micro_batch=1, grad_accum=1, seconds=seconds, forward_seconds=0.0,
        backward_seconds=0.0, optimizer_seconds=0.0, samples_per_second=1 / seconds,
        tokens_per_second=None, flops_per_step=0, compute_bound_share=1.0,
        memory_bound_share=0.0, host_bound_share=0.0, label=TimeLabel.MODELLED,
        basis=MeasuredBasis(seconds=seconds, on="cpu", ratio=None),
    )  # fmt: skip


class _Estimate:
    """The two fields of an Estimate the forecast reads."""

    def __init__(self, step: StepTime | None, missing: NoStepTime | None = None) -> None:
        self.step_time, self.step_time_missing = step, missing
        self.device = type("D", (), {"display": "CPU (host RAM)"})()


def test_a_run_over_a_minute_is_warned_about_with_the_way_out():
    ahead = forecast(_Estimate(_step(41.0)), DeviceKind.CPU, Precision.FP32, 13, LAPTOP, load=0.5)
    assert ahead.total_seconds == pytest.approx(13 * 41.0) and ahead.long
    lines = forecast_lines(ahead)
    assert lines[0] == (
        "predicted: 41.0 s per step on CPU (host RAM) (modelled), 8.9 min for the 13 steps "
        "(warm-up included)",
        False,
    )
    text, warning = lines[1]
    assert warning and text.startswith("warning: this run is predicted to take 8.9 min, over 60 s")
    looped = forecast(
        _Estimate(_step(41.0)), DeviceKind.CPU, Precision.FP32, 13, LAPTOP, load=0.5, loop_steps=10
    )
    assert looped.total_seconds == pytest.approx(24 * 41.0)  # the window's filling step too
    assert forecast_lines(looped)[0][0].endswith(
        "16.4 min for the 13 steps (warm-up included) and 10 back to back "
        "(after 1 to fill the queue)"
    )
    assert "--steps" in text and "--batch" in text


def test_a_short_run_is_not_warned_about():
    seconds = LONG_RUN_SECONDS / 13 - 0.01
    ahead = forecast(
        _Estimate(_step(seconds)), DeviceKind.CPU, Precision.FP32, 13, LAPTOP, load=0.5
    )
    assert not ahead.long
    assert [w for _, w in forecast_lines(ahead)] == [False]


@pytest.mark.parametrize(
    ("precision", "dtype", "flags"),
    [(Precision.BF16, "bf16", "avx512_bf16, amx_bf16"), (Precision.FP16, "fp16", "avx512_fp16")],
)
def test_half_precision_this_cpu_emulates_is_warned_about_naming_the_flags(precision, dtype, flags):
    ahead = forecast(_Estimate(_step(1.0)), DeviceKind.CPU, precision, 4, LAPTOP, load=0.5)
    assert ahead.slow_half is not None and ahead.slow_half.dtype == dtype
    text, warning = forecast_lines(ahead)[-1]
    assert warning and text.startswith(
        f"warning: {dtype} on Intel(R) Core(TM) i7-8550U is emulated"
    )
    assert flags in text and "slower than fp32" in text


def test_no_half_precision_warning_where_it_is_native_in_fp32_or_on_a_gpu():
    native = forecast(_Estimate(_step(1.0)), DeviceKind.CPU, Precision.BF16, 4, SAPPHIRE, load=0.5)
    fp32 = forecast(_Estimate(_step(1.0)), DeviceKind.CPU, Precision.FP32, 4, LAPTOP, load=0.5)
    gpu = forecast(_Estimate(_step(1.0)), DeviceKind.CUDA, Precision.FP16, 4, LAPTOP, load=0.5)
    assert native.slow_half is fp32.slow_half is gpu.slow_half is None


def test_without_an_estimate_the_reason_is_said_and_the_warning_still_comes():
    ahead = forecast(None, DeviceKind.CPU, Precision.BF16, 4, LAPTOP, load=0.5)
    lines = forecast_lines(ahead)
    assert lines[0] == ("no predicted step time: no estimate beside the run", False)
    assert lines[1][1] and "bf16" in lines[1][0]


def test_a_busy_machine_is_warned_about_on_the_cpu_only():
    busy = forecast(_Estimate(_step(1.0)), DeviceKind.CPU, Precision.FP32, 4, LAPTOP, load=11.7)
    assert (busy.load, busy.cores) == (11.7, 4)
    assert forecast_lines(busy)[-1] == (
        "warning: this machine is busy (load average 11.7 on 4 cores): steps will take longer "
        "than predicted, which assumes an idle CPU",
        True,
    )
    unpredicted = forecast(None, DeviceKind.CPU, Precision.FP32, 4, LAPTOP, load=11.7)
    assert forecast_lines(unpredicted)[-1] == (
        "warning: this machine is busy (load average 11.7 on 4 cores): steps will take longer "
        "than on an idle CPU",
        True,
    )
    idle = forecast(_Estimate(_step(1.0)), DeviceKind.CPU, Precision.FP32, 4, LAPTOP, load=3.9)
    gpu = forecast(_Estimate(_step(1.0)), DeviceKind.CUDA, Precision.FP32, 4, LAPTOP, load=11.7)
    assert idle.load is gpu.load is None


def test_each_step_is_one_line():
    assert step_line(StepDone(index=0, total=13, warmup=True, seconds=41.2)) == (
        "step 1/13 (warm-up): 41.2 s"
    )
    assert step_line(StepDone(index=12, total=13, warmup=False, seconds=0.25)) == (
        "step 13/13 (timed): 250 ms"
    )


@pytest.mark.slow
def test_measure_on_the_cpu_prints_the_forecast_and_each_step(capsys):
    spec = ["tests.measure_models:capped_mlp", "--input", "x=B,16:float32", "--batch", "4"]
    assert main(["measure", *spec, "--steps", "2", "--warmup", "1", "--json"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("predicted: ")
    assert "for the 3 steps (warm-up included) and 2 back to back" in err[0]
    steps = [line.split(":")[0] for line in err if line.startswith("step ")]
    assert steps == ["step 1/3 (warm-up)", "step 2/3 (timed)", "step 3/3 (timed)"]
