"""cuDNN's recurrent kernels' per-step cost, read off the calibration's two kernels."""

from __future__ import annotations

import pytest

from trainfit.timing.constants import calibration
from trainfit.timing.kernels import interpolate_curve, rnn_layer_seconds, rnn_step_seconds


def test_a_curve_is_linear_in_log_x_and_flat_beyond_its_ends() -> None:
    curve = [[10.0, 1.0], [1000.0, 3.0]]
    assert interpolate_curve(curve, 1.0) == 1.0
    assert interpolate_curve(curve, 100.0) == pytest.approx(2.0)
    assert interpolate_curve(curve, 10**6) == 3.0


def test_a_recurrent_weight_between_the_two_kernels_costs_between_them() -> None:
    cal = calibration()
    low, high = (cal.lstm_step_seconds[k]["backward"] for k in ("persistent", "stepped"))
    # an LSTM at hidden 160, an RNN_TANH at 384, a GRU at 288
    costs = [rnn_step_seconds(cal, n, "backward") for n in (4 * 160**2, 384**2, 3 * 288**2)]
    assert low < costs[0] < costs[1] < costs[2] < high
    # halfway in log size between 4 x 128 x 128 and 4 x 256 x 256: halfway in cost
    assert rnn_step_seconds(cal, 4 * 181 * 181, "backward") == pytest.approx(
        (low + high) / 2, rel=0.01
    )


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_a_half_precision_recurrent_layer_runs_the_stepped_kernels_at_any_size(dtype: str) -> None:
    cal = calibration()
    stepped = cal.lstm_step_seconds["stepped"]["forward"]
    assert rnn_step_seconds(cal, 4 * 64 * 64, "forward", dtype) == pytest.approx(stepped)
    assert rnn_step_seconds(cal, 4 * 64 * 64, "forward") < stepped / 2  # fp32: persistent


@pytest.mark.parametrize(
    ("elements", "dtype", "stepped"),
    [(4 * 64 * 64, "bf16", True), (3 * 512 * 512, "fp32", True), (4 * 192 * 192, "fp32", False)],
)
def test_a_stepped_recurrent_call_adds_the_fitted_figure_per_layer(
    elements: int, dtype: str, stepped: bool
) -> None:
    cal = calibration()
    for which in ("forward", "backward"):
        expected = cal.host_fit.rnn_layer_seconds[which] if stepped else 0.0
        assert rnn_layer_seconds(cal, elements, which, dtype) == expected
    assert cal.host_fit.rnn_layer_seconds["forward"] > 0


def test_an_fp32_gru_backward_over_the_persistent_bound_runs_the_stepped_kernels() -> None:
    cal = calibration()
    stepped = cal.lstm_step_seconds["stepped"]
    per_layer = cal.host_fit.rnn_layer_seconds
    gru = 3 * 224 * 224  # over 4 x 128 x 128, under the forward's stepped 4 x 256 x 256
    assert rnn_step_seconds(cal, gru, "backward", "fp32", gates=3) == stepped["backward"]
    assert rnn_layer_seconds(cal, gru, "backward", "fp32", gates=3) == per_layer["backward"]
    # its forward, an LSTM's or an RNN_TANH's backward of that size: interpolated as before
    assert rnn_step_seconds(cal, gru, "forward", "fp32", gates=3) < stepped["forward"]
    assert rnn_layer_seconds(cal, gru, "forward", "fp32", gates=3) == 0.0
    for gates in (4, 1, 0):
        assert rnn_step_seconds(cal, gru, "backward", "fp32", gates) < stepped["backward"]
        assert rnn_layer_seconds(cal, gru, "backward", "fp32", gates) == 0.0
    # a GRU within the persistent kernel's bound keeps the persistent cost
    small = 3 * 128 * 128
    persistent = cal.lstm_step_seconds["persistent"]["backward"]
    assert rnn_step_seconds(cal, small, "backward", "fp32", gates=3) == persistent
