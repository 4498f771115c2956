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


def rnn_step_seconds(
    cal: Calibration, elements: int, which: str, dtype: str = "fp32", gates: int = 0
) -> float:
    """Device seconds of one sequential step (time step x layer x direction) of a cuDNN
    recurrent layer whose recurrent weight has `elements` elements (gates x hidden x output),
    in `which` pass ("forward" or "backward").

    cuDNN's persistent kernel holds a small recurrent weight on chip (an LSTM's up to hidden
    128 by the calibration grid: 4 x 128 x 128 elements; an RNN_TANH at hidden 256 ran
    persistent); the grid's LSTMs at hidden 256 and over ran a kernel per step. In between,
    the per-step cost rises with the weight's size, linear in its log, from the persistent
    kernel's to the stepped one's at 4 x 256 x 256 elements (an RNN_TANH at hidden 384 lies
    between the two). In bf16 and fp16 cuDNN runs the stepped kernels at every size (LSTM, GRU
    and RNN_TANH from hidden 64 to 1024 took 16-24 us a step each way). In fp32 a GRU's
    backward (`gates` 3) over the persistent bound runs the stepped kernels too: GRU calls at
    hidden 192 and 256, 1-4 layers, grew by the stepped backward's cost per layer where their
    forward grew by the interpolated one; LSTM and RNN_TANH calls in that range did not do so
    consistently and keep the interpolation."""
    if dtype in ("bf16", "fp16") or _stepped_backward(cal, elements, which, gates):
        return cal.lstm_step_seconds["stepped"][which]
    persistent = 4 * cal.lstm_persistent_hidden**2
    curve = [
        [float(persistent), cal.lstm_step_seconds["persistent"][which]],
        [4.0 * persistent, cal.lstm_step_seconds["stepped"][which]],
    ]
    return interpolate_curve(curve, float(elements))


def rnn_layer_seconds(
    cal: Calibration, elements: int, which: str, dtype: str = "fp32", gates: int = 0
) -> float:
    """Device seconds a cuDNN recurrent call adds per layer and direction beside its steps,
    where it runs the stepped kernels (bf16 and fp16, fp32 from 4 x 256 x 256 elements): the
    host fit's `rnn_layer_seconds`, read off calls of 1-4 layers timed whole (a multi-layer
    call's cost grows by its steps and this per layer); 0 for the persistent kernel, whose
    fp32 calls at hidden 192 grew by their steps alone forward."""
    stepped = dtype in ("bf16", "fp16") or elements >= 16 * cal.lstm_persistent_hidden**2
    stepped = stepped or _stepped_backward(cal, elements, which, gates)
    return cal.host_fit.rnn_layer_seconds[which] if stepped else 0.0


def _stepped_backward(cal: Calibration, elements: int, which: str, gates: int) -> bool:
    """Whether an fp32 call's `which` pass runs the stepped kernels below the forward's
    stepped size: a GRU's backward, from above the persistent kernel's bound."""
    return which == "backward" and gates == 3 and elements > 4 * cal.lstm_persistent_hidden**2
