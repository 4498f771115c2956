"""The step-time model's constants: the optimizers' host cost, the figures fp16 shares with
bf16."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from trainfit.spec import OptimizerPath, TrainSpec
from trainfit.timing.constants import calibration

FOREACH = OptimizerPath.FOREACH


@pytest.mark.parametrize("optimizer", ["sgd", "sgd-momentum", "adamw"])
def test_a_measured_optimizer_costs_the_host_its_fitted_line(optimizer: str) -> None:
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer=optimizer)
    fixed, per = cal.host_fit.optimizer_lines[optimizer]
    assert cal.optimizer_host(spec, 26, FOREACH) == pytest.approx(fixed + 26 * per)
    assert cal.optimizer_host(spec, 26, FOREACH) > cal.optimizer_host(spec, 6, FOREACH)


def test_plain_sgd_costs_the_host_less_than_its_microbenchmark_put_it() -> None:
    """Whole optimizer steps over 26 tensors took about 115 us; the single-op
    microbenchmark times the old scale put it at about 480 us."""
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer="sgd")
    micro = (
        cal.optimizer_host_seconds_fixed["sgd"] + 26 * cal.optimizer_host_seconds_per_param["sgd"]
    )
    assert cal.optimizer_host(spec, 26, FOREACH) < micro / 2


def test_an_unmeasured_optimizer_keeps_the_microbenchmark_times_the_scale() -> None:
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer="adafactor")
    assert "adafactor" not in cal.host_fit.optimizer_lines
    expected = (
        cal.optimizer_host_seconds_fixed["adafactor"]
        + 10 * cal.optimizer_host_seconds_per_param["adafactor"]
    ) * cal.host_fit.optimizer_scale
    assert cal.optimizer_host(spec, 10, OptimizerPath.FOR_LOOP) == pytest.approx(expected)


def test_fp16_takes_bf16s_convolution_and_unaligned_matmul_figures_by_name() -> None:
    """calibration.json names what fp16 shares with bf16 (one convolution fit over both dtypes'
    rows; no fp16 unaligned matmul measured) instead of holding a copy; read, fp16 has bf16's
    figures and the calibration says which."""
    raw = json.loads(resources.files("trainfit.timing").joinpath("calibration.json").read_text())
    assert "fp16" not in raw["conv_fit"] and "fp16" not in raw["matmul_unaligned_efficiency"]
    cal = calibration()
    assert cal.shared == {
        "conv_fit": {"fp16": "bf16"},
        "matmul_unaligned_efficiency": {"fp16": "bf16"},
    }
    assert cal.conv_fit["fp16"] == cal.conv_fit["bf16"] == raw["conv_fit"]["bf16"]
    assert cal.matmul_unaligned_efficiency["fp16"] == raw["matmul_unaligned_efficiency"]["bf16"]
    # NB: fp16's own matmul figures were measured and stay its own
    assert cal.matmul_efficiency["fp16"] != cal.matmul_efficiency["bf16"]


@pytest.mark.parametrize("optimizer", ["sgd", "sgd-momentum", "adam", "adamw"])
def test_the_for_loop_costs_the_host_more_per_tensor_and_fused_less(optimizer: str) -> None:
    """Measured in the same processes on the H100 (optimizer_paths_h100): per tensor the
    for-loop path costs 8-11x the foreach path, fused at most the foreach path's cost."""
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer=optimizer)
    cost = {
        p: cal.optimizer_host(spec, 512, p) for p in OptimizerPath if p is not OptimizerPath.AUTO
    }
    assert cost[OptimizerPath.FOR_LOOP] > 7 * cost[OptimizerPath.FOREACH]
    assert cost[OptimizerPath.FUSED] <= cost[OptimizerPath.FOREACH]


def test_adafactor_s_foreach_path_costs_about_half_its_default_for_loop() -> None:
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer="adafactor")
    ratio = cal.optimizer_host(spec, 100, FOREACH) / cal.optimizer_host(
        spec, 100, OptimizerPath.FOR_LOOP
    )
    assert 0.4 < ratio < 0.7


def test_a_path_whose_host_cost_was_not_measured_is_one_error() -> None:
    from trainfit.errors import TrainfitError

    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer="adafactor")
    with pytest.raises(TrainfitError, match=r"'adafactor' on its fused path was not measured"):
        cal.optimizer_host(spec, 10, OptimizerPath.FUSED)


def test_a_cuda_step_on_the_for_loop_path_takes_longer_on_the_host() -> None:
    """End to end: a small MLP's step on an H100 (host-bound) is slower on the for-loop path
    than on the default foreach one, and no slower fused; on an Apple GPU the path is not
    modelled (the calibrated cost stands), so the explicit for-loop changes nothing there."""
    from trainfit import estimate

    def seconds(device: str, path: str) -> float:
        found = estimate(
            model="trainfit.models.zoo:emotion_mlp", batch=8, device=device, optimizer_path=path
        )
        assert found.step_time is not None
        return found.step_time.seconds

    assert seconds("h100", "for-loop") > 1.2 * seconds("h100", "auto")
    assert seconds("h100", "fused") <= seconds("h100", "auto")
    assert seconds("m4-pro-24gb", "for-loop") == seconds("m4-pro-24gb", "auto")
