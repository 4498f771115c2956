"""The step-time model's host floor: what issuing each kind of op costs the host."""

from __future__ import annotations

import pytest

from trainfit.timing.constants import calibration
from trainfit.timing.host import step_host_costs
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
        OpCost(OpKind.RNN, "fp32", 10, 8, 100, 4 * 128 * 128, graph=True),
    ]
    extra = cal.host_library_extra_seconds
    forward = step_host_costs(cal, ops, Phase.FORWARD, 0.0)
    assert forward == pytest.approx(
        [
            fit.graph_op_seconds,
            fit.op_seconds,
            fit.view_seconds,
            fit.module_seconds,
            fit.graph_op_seconds + extra["conv_forward"] * fit.library_scale,
            fit.graph_op_seconds + fit.rnn_call_seconds,
        ]
    )
    backward = step_host_costs(cal, ops, Phase.BACKWARD, 0.0)
    assert backward[0] == backward[1] == pytest.approx(fit.backward_op_seconds)
    assert backward[2] == pytest.approx(fit.backward_view_seconds)
    assert backward[4] == pytest.approx(
        fit.backward_op_seconds + extra["conv_backward"] * fit.library_scale
    )
    assert backward[5] == pytest.approx(fit.backward_op_seconds + fit.rnn_call_seconds)
    assert step_host_costs(cal, ops, Phase.OPTIMIZER, 1e-5)[:3] == [1e-5] * 3
