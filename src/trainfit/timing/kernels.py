"""Kernel times read off fitted curves: a value between two calibration points, fused
attention's factor by shape and parallelism, and the per-step cost of cuDNN's recurrent
kernels."""

from __future__ import annotations

import itertools
import math

from trainfit.timing.constants import Calibration
from trainfit.trace.costs import AttentionShape


def interpolate_curve(curve: list[list[float]], x: float) -> float:
    """y at `x` on a curve of (x, y) points, linear in log x, flat beyond its ends."""
    if x <= curve[0][0]:
        return curve[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(curve):
        if x <= x1:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + t * (y1 - y0)
    return curve[-1][1]


ATTENTION_TILE = {"half": 128, "fp32": 64}
"""Query rows one block of the H100's fused attention takes: cuDNN's (fp16, bf16; the few-heads
rows slow down below one block per SM at this tile) and the memory-efficient kernel's (fp32,
its kernels' 64 x 64 tiles)."""


def attention_factor(cal: Calibration, shape: AttentionShape, dtype: str, sms: int) -> float:
    """A fused attention call's time over the FLOPs form's: the attention grid's factor at
    its head size and query length, times the slowdown of its few problems on `sms` SMs.

    NB: measured on the H100 with 16,384 tokens a call, head sizes 32-128 and lengths
    128-4096 (flat beyond); a call with dropout but not causal takes the full call's factor
    times dropout's measured share in causal calls (no such row was measured); a masked
    fp16/bf16 call (the memory-efficient kernel on the trace, cuDNN's with a mask on the
    GPU) takes the unmasked factor. A call whose keys differ in number from its queries
    (cross-attention, a decoding step's one query over the cache) is outside what was
    measured and keeps the FLOPs form (factor 1): read at its query length, a GPT-2 decoding
    step at batch 1 would take 7.4."""
    if shape.keys != shape.length:
        return 1.0
    group = "fp32" if dtype == "fp32" else "half"
    side = "backward" if shape.backward else "forward"

    def grid(variant: str) -> float:
        rows = cal.attention_curve[group][variant][side]
        by_head = [[head, interpolate_curve(curve, shape.length)] for head, curve in rows]
        return interpolate_curve(by_head, shape.head)

    if shape.causal:
        factor = grid("causal-dropout" if shape.dropout else "causal")
    else:
        factor = grid("full")
        if shape.dropout:
            factor *= grid("causal-dropout") / grid("causal")
    blocks = shape.problems * -(-shape.length // ATTENTION_TILE[group]) / sms
    slowdown = cal.attention_parallel_curve[group]["causal" if shape.causal else "full"][side]
    return factor * interpolate_curve(slowdown, blocks)


GATED_FORWARD_PERSISTENT_HIDDEN = 192
"""The largest hidden size at which an fp32 LSTM's or GRU's forward ran cuDNN's persistent
kernel on the H100 (5 kernels a call up to hidden 192, 83-124 from 208, at batches 8, 24 and
64: benchmarks/steptime/results/rnn_sizes_h100/kernels.json); an RNN_TANH's ran it up to 384,
the grid's largest."""


def rnn_step_seconds(
    cal: Calibration, elements: int, which: str, dtype: str = "fp32", *, gates: int
) -> float:
    """Device seconds of one sequential step (time step x layer x direction) of a cuDNN
    recurrent layer whose recurrent weight has `elements` elements (gates x hidden x output),
    in `which` pass ("forward" or "backward"); `gates`: the layer's gates a step (LSTM 4, GRU
    3, RNN_TANH and RNN_RELU 1: `OpCost.gates`).

    In bf16 and fp16 cuDNN runs the stepped kernels at every size (LSTM, GRU and RNN_TANH from
    hidden 64 to 1024 took 16-24 us a step each way). In fp32 (`stepped_fp32`) cuDNN's
    persistent kernel holds a small recurrent weight on chip: backward up to an LSTM's or GRU's
    hidden 128 and an RNN_TANH's 256 (the H100 grid's next sizes, 144 and 288, ran 94-97
    kernels a call, 16-19 within the bound), forward up to an LSTM's or GRU's hidden 192; over
    it the call runs two or three kernels a step (`_stepped_fp32_seconds`). Within it a
    backward costs the persistent kernel's figure (no fp32 backward within its bound is over
    4 x 128 x 128 elements); a forward's per-step cost rises with the weight's size, linear in
    its log, from the persistent kernel's at 4 x 128 x 128 elements toward the stepped one's at
    4 x 256 x 256 (the grid's persistent forwards took 1-14 us a step from hidden 96 to 192)."""
    if dtype in ("bf16", "fp16"):
        return cal.lstm_step_seconds["stepped"][which]
    if stepped_fp32(cal, elements, which, gates):
        return _stepped_fp32_seconds(cal, elements, which, gates)
    persistent = 4 * cal.lstm_persistent_hidden**2
    curve = [
        [float(persistent), cal.lstm_step_seconds["persistent"][which]],
        [4.0 * persistent, cal.lstm_step_seconds["stepped"][which]],
    ]
    return interpolate_curve(curve, float(elements))


def rnn_layer_seconds(
    cal: Calibration, elements: int, which: str, dtype: str = "fp32", *, gates: int
) -> float:
    """Device seconds a cuDNN recurrent call adds per layer and direction beside its steps,
    where it runs the stepped kernels: the host fit's `rnn_layer_seconds`, read off calls of
    1-4 layers timed whole (a multi-layer call's cost grows by its steps and this per layer);
    0 for the persistent kernel, whose fp32 calls at hidden 192 grew by their steps alone
    forward."""
    stepped = dtype in ("bf16", "fp16") or stepped_fp32(cal, elements, which, gates)
    return cal.host_fit.rnn_layer_seconds[which] if stepped else 0.0


def stepped_fp32(cal: Calibration, elements: int, which: str, gates: int) -> bool:
    """Whether an fp32 call's `which` pass runs the stepped kernels. An LSTM's or GRU's
    (`gates` 3 or 4): backward over hidden 128 (the calibration's persistent bound), forward
    over hidden 192. An RNN_TANH's or RNN_RELU's: backward over 4 x 128 x 128 elements (hidden
    256), forward from 4 x 256 x 256 (hidden 512)."""
    persistent = cal.lstm_persistent_hidden**2
    if gates >= 3:
        widest = persistent if which == "backward" else GATED_FORWARD_PERSISTENT_HIDDEN**2
        return elements > gates * widest
    if which == "backward":
        return elements > 4 * persistent
    return elements >= 16 * persistent


def _stepped_fp32_seconds(cal: Calibration, elements: int, which: str, gates: int) -> float:
    """A stepped fp32 pass's seconds a step: the calibration's (an LSTM at hidden 256 and over:
    two kernels a step forward, three backward, each about 9 us of the host's launch), but two
    thirds of it backward for an RNN_TANH or RNN_RELU, and for an LSTM or GRU under 4 x 256 x
    256 elements, taken to run two kernels a step backward (rnn_lengths_h100: 2 x steps + 14-17
    kernels a call).

    NB: the count of kernels a step is read off the weight's size alone; on the H100 it
    depends on the batch too. Backward, LSTMs ran three from hidden 256 at batch 8 but from 192
    at batch 24 and 224 at batch 64 (rnn_sizes_h100/kernels.json), and at hidden 240 at
    batches 16 and 64 (rnn_lengths_h100); GRUs from 320 at batch 8, 256 at 24, 384 at 64 (two
    at 320 at batch 64 in rnn_lengths_h100). Forward, an RNN_TANH at hidden 512 ran three at
    batch 64 (two at 16); here every stepped forward costs the calibration's two."""
    stepped = cal.lstm_step_seconds["stepped"][which]
    three = gates >= 3 and elements >= 16 * cal.lstm_persistent_hidden**2
    return stepped if which == "forward" or three else stepped * 2 / 3
