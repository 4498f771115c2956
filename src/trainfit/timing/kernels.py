"""Kernel times read off fitted curves: a value between two calibration points, and the
per-step cost of cuDNN's recurrent kernels."""

from __future__ import annotations

import itertools
import math

from trainfit.timing.constants import Calibration


def interpolate_curve(curve: list[list[float]], x: float) -> float:
    """y at `x` on a curve of (x, y) points, linear in log x, flat beyond its ends."""
    if x <= curve[0][0]:
        return curve[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(curve):
        if x <= x1:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + t * (y1 - y0)
    return curve[-1][1]


def rnn_step_seconds(cal: Calibration, elements: int, which: str, dtype: str = "fp32") -> float:
    """Device seconds of one sequential step (time step x layer x direction) of a cuDNN
    recurrent call whose recurrent weight has `elements` elements (gates x hidden x output), in
    `which` pass ("forward" or "backward").

    In bf16 and fp16 cuDNN runs the stepped kernels at every size, and in fp32 over 4 x 256 x
    256 elements; there a call costs the host fit's `rnn_step_seconds` per time step and layer,
    read off calls of 1-4 layers timed whole (21-29 us a step a layer forward, 27-36 backward:
    a multi-layer call's cost is per layer). cuDNN's persistent kernel holds a small fp32
    recurrent weight on chip (an LSTM's up to hidden 128 by the calibration grid: 4 x 128 x 128
    elements; an RNN_TANH at hidden 256 ran persistent). From that size to 4 x 256 x 256 the
    per-step cost rises with the weight's size, linear in its log, between the calibration
    grid's two kernels (an RNN_TANH at hidden 384 lies between the two).

    NB: the curve's top is the grid's stepped kernel (18 us forward, 27 backward), below the
    whole calls' figure: loop-timed fp32 steps with weights in that range (an LSTM at hidden
    192, an RNN_TANH at 384) ran at or under the curve, a backward call timed alone at hidden
    192 at 29-30 us a step a layer; the step at 4 x 256 x 256 elements is where the data part."""
    stepped = cal.host_fit.rnn_step_seconds[which]
    persistent = 4 * cal.lstm_persistent_hidden**2
    if dtype in ("bf16", "fp16") or elements > 4 * persistent:
        return stepped
    curve = [
        [float(persistent), cal.lstm_step_seconds["persistent"][which]],
        [4.0 * persistent, cal.lstm_step_seconds["stepped"][which]],
    ]
    return interpolate_curve(curve, float(elements))
