"""The step-time model's host floor and cuDNN's persistent recurrent kernel."""

from __future__ import annotations

import pytest

from trainfit.hardware.catalog import get_device
from trainfit.spec import TrainSpec
from trainfit.timing.constants import calibration
from trainfit.timing.step import Rates, step_host_costs
from trainfit.trace.costs import OpCost, OpKind
from trainfit.training import Phase


def test_the_host_floor_prices_each_kind_of_op() -> None:
    cal = calibration()
    fit = cal.host_fit
    assert fit.fitted_on and "timing/emotion-mlp-fp32" in fit.fitted_on
    ops = [
        OpCost(OpKind.MEMORY, "fp32", 0, 8, 1, graph=True),
        OpCost(OpKind.MEMORY, "fp32", 0, 8, 1),
        OpCost(OpKind.HOST, "fp32", 0, 0, 0),
        OpCost(OpKind.MODULE, "int", 0, 0, 0),
        OpCost(OpKind.CONV, "fp32", 10, 8, 1, graph=True),
    ]
    extra = cal.host_library_extra_seconds
    forward = step_host_costs(cal, ops, Phase.FORWARD, 0.0)
    assert forward == pytest.approx(
        [
            fit.graph_op_seconds,
            fit.op_seconds,
            fit.view_seconds,
            fit.module_seconds,
            fit.graph_op_seconds + extra["conv_forward"],
        ]
    )
    backward = step_host_costs(cal, ops, Phase.BACKWARD, 0.0)
    assert backward[0] == backward[1] == pytest.approx(fit.backward_op_seconds)
    assert backward[2] == pytest.approx(fit.backward_view_seconds)
    assert backward[4] == pytest.approx(fit.backward_op_seconds + extra["conv_backward"])
    assert step_host_costs(cal, ops, Phase.OPTIMIZER, 1e-5)[:3] == [1e-5] * 3


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
