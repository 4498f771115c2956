"""The step-time model's constants: the optimizers' host cost, the figures fp16 shares with
bf16."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from trainfit.spec import TrainSpec
from trainfit.timing.constants import calibration


@pytest.mark.parametrize("optimizer", ["sgd", "sgd-momentum", "adamw"])
def test_a_measured_optimizer_costs_the_host_its_fitted_line(optimizer: str) -> None:
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer=optimizer)
    fixed, per = cal.host_fit.optimizer_lines[optimizer]
    assert cal.optimizer_host(spec, 26) == pytest.approx(fixed + 26 * per)
    assert cal.optimizer_host(spec, 26) > cal.optimizer_host(spec, 6)


def test_plain_sgd_costs_the_host_less_than_its_microbenchmark_put_it() -> None:
    """Whole optimizer steps over 26 tensors took about 115 us; the single-op
    microbenchmark times the old scale put it at about 480 us."""
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer="sgd")
    micro = (
        cal.optimizer_host_seconds_fixed["sgd"] + 26 * cal.optimizer_host_seconds_per_param["sgd"]
    )
    assert cal.optimizer_host(spec, 26) < micro / 2


def test_an_unmeasured_optimizer_keeps_the_microbenchmark_times_the_scale() -> None:
    cal = calibration()
    spec = TrainSpec(model="gpt2", optimizer="adafactor")
    assert "adafactor" not in cal.host_fit.optimizer_lines
    expected = (
        cal.optimizer_host_seconds_fixed["adafactor"]
        + 10 * cal.optimizer_host_seconds_per_param["adafactor"]
    ) * cal.host_fit.optimizer_scale
    assert cal.optimizer_host(spec, 10) == pytest.approx(expected)


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
