"""cuDNN's recurrent kernels' per-step cost, read off the calibration's two kernels."""

from __future__ import annotations

import pytest

from trainfit.timing.constants import calibration
from trainfit.timing.kernels import interpolate_curve, rnn_step_seconds


def test_a_curve_is_linear_in_log_x_and_flat_beyond_its_ends() -> None:
    curve = [[10.0, 1.0], [1000.0, 3.0]]
    assert interpolate_curve(curve, 1.0) == 1.0
    assert interpolate_curve(curve, 100.0) == pytest.approx(2.0)
    assert interpolate_curve(curve, 10**6) == 3.0


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_a_recurrent_weight_between_the_two_kernels_costs_between_them(which: str) -> None:
    cal = calibration()
    low = cal.lstm_step_seconds["persistent"][which]
    high = cal.lstm_step_seconds["stepped"][which]
    # an LSTM at hidden 160, an RNN_TANH at 384, a GRU at 288
    costs = [rnn_step_seconds(cal, n, which) for n in (4 * 160**2, 384**2, 3 * 288**2)]
    assert low < costs[0] < costs[1] < costs[2] < high
    # halfway in log size between 4 x 128 x 128 and 4 x 256 x 256: halfway in cost
    assert rnn_step_seconds(cal, 4 * 181 * 181, which) == pytest.approx((low + high) / 2, rel=0.01)


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_a_recurrent_weight_over_the_curve_costs_the_whole_calls_figure(which: str) -> None:
    cal = calibration()
    fitted = cal.host_fit.rnn_step_seconds[which]
    assert rnn_step_seconds(cal, 3 * 512 * 512, which) == fitted  # a GRU at hidden 512
    assert rnn_step_seconds(cal, 4 * 256 * 256, which) == cal.lstm_step_seconds["stepped"][which]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_a_half_precision_recurrent_layer_runs_the_stepped_kernels_at_any_size(dtype: str) -> None:
    cal = calibration()
    stepped = cal.host_fit.rnn_step_seconds["forward"]
    assert rnn_step_seconds(cal, 4 * 64 * 64, "forward", dtype) == pytest.approx(stepped)
    assert rnn_step_seconds(cal, 4 * 64 * 64, "forward") < stepped / 2  # fp32: persistent
