"""cuDNN's recurrent kernels' per-step cost, read off the calibration's two kernels."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from trainfit.timing.constants import calibration
from trainfit.timing.kernels import (
    attention_factor,
    interpolate_curve,
    rnn_layer_seconds,
    rnn_step_seconds,
    stepped_fp32,
)
from trainfit.trace.costs import AttentionShape


def test_a_curve_is_linear_in_log_x_and_flat_beyond_its_ends() -> None:
    curve = [[10.0, 1.0], [1000.0, 3.0]]
    assert interpolate_curve(curve, 1.0) == 1.0
    assert interpolate_curve(curve, 100.0) == pytest.approx(2.0)
    assert interpolate_curve(curve, 10**6) == 3.0


def test_a_forward_between_the_two_kernels_costs_between_them() -> None:
    cal = calibration()
    low, high = (cal.lstm_step_seconds[k]["forward"] for k in ("persistent", "stepped"))
    # an LSTM at hidden 160, an RNN_TANH at 384, an LSTM at 192: persistent forward
    costs = [
        rnn_step_seconds(cal, n, "forward", gates=g)
        for n, g in ((4 * 160**2, 4), (384**2, 1), (4 * 192**2, 4))
    ]
    assert low < costs[0] < costs[2] < high
    assert low < costs[1] < high
    # halfway in log size between 4 x 128 x 128 and 4 x 256 x 256: halfway in cost
    assert rnn_step_seconds(cal, 4 * 181 * 181, "forward", gates=1) == pytest.approx(
        (low + high) / 2, rel=0.01
    )


@pytest.mark.parametrize(
    ("hidden", "gates", "stepped"),
    [(192, 4, False), (208, 4, True), (192, 3, False), (208, 3, True), (384, 1, False)],
)
def test_an_fp32_lstm_or_gru_forward_leaves_the_persistent_kernel_over_hidden_192(
    hidden: int, gates: int, stepped: bool
) -> None:
    cal = calibration()
    elements = gates * hidden * hidden
    assert stepped_fp32(cal, elements, "forward", gates) is stepped
    own = rnn_step_seconds(cal, elements, "forward", gates=gates)
    assert (own == cal.lstm_step_seconds["stepped"]["forward"]) is stepped
    per_layer = rnn_layer_seconds(cal, elements, "forward", gates=gates)
    assert per_layer == (cal.host_fit.rnn_layer_seconds["forward"] if stepped else 0.0)


@pytest.mark.parametrize(("hidden", "gates"), [(144, 4), (144, 3), (288, 1)])
def test_an_fp32_backward_over_the_persistent_bound_runs_two_stepped_kernels_a_step(
    hidden: int, gates: int
) -> None:
    cal = calibration()
    elements = gates * hidden * hidden
    stepped = cal.lstm_step_seconds["stepped"]["backward"]
    assert stepped_fp32(cal, elements, "backward", gates)
    assert rnn_step_seconds(cal, elements, "backward", gates=gates) == pytest.approx(
        stepped * 2 / 3
    )
    assert rnn_layer_seconds(cal, elements, "backward", gates=gates) > 0
    # within the bound: the persistent kernel's cost
    under = gates * 128 * 128 if gates > 1 else 256 * 256
    assert not stepped_fp32(cal, under, "backward", gates)
    persistent = cal.lstm_step_seconds["persistent"]["backward"]
    assert rnn_step_seconds(cal, under, "backward", gates=gates) == persistent


def test_a_large_lstm_or_gru_backward_runs_three_kernels_a_step() -> None:
    cal = calibration()
    stepped = cal.lstm_step_seconds["stepped"]["backward"]
    assert rnn_step_seconds(cal, 4 * 256**2, "backward", gates=4) == stepped
    assert rnn_step_seconds(cal, 3 * 320**2, "backward", gates=3) == stepped
    assert rnn_step_seconds(cal, 512**2, "backward", gates=1) == pytest.approx(stepped * 2 / 3)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_a_half_precision_recurrent_layer_runs_the_stepped_kernels_at_any_size(dtype: str) -> None:
    cal = calibration()
    stepped = cal.lstm_step_seconds["stepped"]["forward"]
    assert rnn_step_seconds(cal, 4 * 64 * 64, "forward", dtype, gates=4) == pytest.approx(stepped)
    assert rnn_step_seconds(cal, 4 * 64 * 64, "forward", gates=4) < stepped / 2  # fp32: persistent


@pytest.mark.parametrize(
    ("elements", "dtype", "gates", "stepped"),
    [
        (4 * 64 * 64, "bf16", 4, True),
        (3 * 512 * 512, "fp32", 3, True),
        (4 * 112 * 112, "fp32", 4, False),
    ],
)
def test_a_stepped_recurrent_call_adds_the_fitted_figure_per_layer(
    elements: int, dtype: str, gates: int, stepped: bool
) -> None:
    cal = calibration()
    for which in ("forward", "backward"):
        expected = cal.host_fit.rnn_layer_seconds[which] if stepped else 0.0
        assert rnn_layer_seconds(cal, elements, which, dtype, gates=gates) == expected
    assert cal.host_fit.rnn_layer_seconds["forward"] > 0


@pytest.mark.parametrize(
    ("study", "count"),
    [("rnn_sizes_h100/kernels.json", 108), ("rnn_lengths_h100/rnn_lengths.json", 120)],
)
def test_the_fp32_bounds_agree_with_every_row_of_the_kernel_studies(study: str, count: int) -> None:
    # NB: the H100 sweeps (hidden 96-512, batches 8-64, 16-256 steps, 1-2 layers) counted each
    # pass's kernels: the persistent kernel runs a handful a call, the stepped ones two or more
    # a step and layer
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "benchmarks/steptime/results"
    rows = json.loads((results / study).read_text())["rows"]
    cal = calibration()
    gates = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1}
    disagree = [
        (row["mode"], row["hidden"], row["batch"], row["steps"], which)
        for row in rows
        for which in ("forward", "backward")
        if stepped_fp32(cal, gates[row["mode"]] * row["hidden"] ** 2, which, gates[row["mode"]])
        is not (row[f"{which}_kernels"] >= 2 * row["steps"] * row.get("layers", 1))
    ]
    assert len(rows) == count
    assert disagree == []


def _attention(problems: int, length: int, head: int, **flags: bool) -> AttentionShape:
    shape = dict(causal=False, dropout=False, backward=False) | flags
    return AttentionShape(problems, length, head, **shape, keys=length)


def test_a_call_whose_keys_differ_from_its_queries_keeps_the_flops_form() -> None:
    # NB: a decoding step (one query over 512 cached keys) and cross-attention were not measured
    cal = calibration()
    decode = dataclasses.replace(_attention(12, 1, 64), keys=512)
    assert attention_factor(cal, decode, "bf16", 132) == 1.0
    cross = dataclasses.replace(_attention(96, 448, 64), keys=1500)
    assert attention_factor(cal, cross, "fp32", 132) == 1.0
    assert attention_factor(cal, _attention(96, 448, 64), "fp32", 132) != 1.0


def test_a_full_attention_call_takes_the_grids_factor_at_its_head_size_and_length() -> None:
    cal = calibration()
    rows = dict((h, c) for h, c in cal.attention_curve["half"]["full"]["forward"])
    # many problems: beyond the parallel curve's last point
    many = cal.attention_parallel_curve["half"]["full"]["forward"][-1][1]
    factor = attention_factor(cal, _attention(4096, 1024, 64), "bf16", 132)
    assert factor == pytest.approx(interpolate_curve(rows[64], 1024) * many)
    # a head size between two measured ones lies between their factors
    low, high = (interpolate_curve(rows[h], 1024) * many for h in (64, 128))
    assert min(low, high) < attention_factor(cal, _attention(4096, 1024, 96), "bf16", 132)
    assert attention_factor(cal, _attention(4096, 1024, 96), "bf16", 132) < max(low, high)


def test_few_attention_problems_leave_the_gpu_idle() -> None:
    # NB: one sequence's 12 heads at 1024 tokens make 96 cuDNN blocks on 132 SMs
    cal = calibration()
    few = attention_factor(cal, _attention(12, 1024, 64, causal=True), "bf16", 132)
    many = attention_factor(cal, _attention(4096, 1024, 64, causal=True), "bf16", 132)
    assert few > 1.5 * many
    # the same call on a GPU of half the SMs fills it better
    assert attention_factor(cal, _attention(12, 1024, 64, causal=True), "bf16", 66) < few


def test_dropout_without_causality_takes_its_measured_share_of_causal_calls() -> None:
    cal = calibration()

    def factor(**flags: bool) -> float:
        return attention_factor(cal, _attention(4096, 512, 64, **flags), "fp32", 132)

    # NB: the parallel curve's factor is the same for both causal calls (one problem count)
    share = factor(causal=True, dropout=True) / factor(causal=True)
    assert share > 1  # fp32's dropout kernels are slower in the grid
    assert factor(dropout=True) == pytest.approx(factor() * share)


def _profiled_over_modelled(name: str, keep: Any) -> list[float]:
    """The H100's profiled SDPA calls of `attention_h100/<name>.json` that `keep` selects: the
    model's device time (the attention factor applied) over the profiled, forward and backward."""
    from benchmarks.steptime.attention_grid import predicted

    path = Path(__file__).parents[2] / "benchmarks/steptime/results/attention_h100" / name
    ratios = []
    for row in json.loads(path.with_suffix(".json").read_text())["rows"]:
        if keep(row):
            forward, backward = predicted(row)
            ratios += [forward / row["forward_s"], backward / row["backward_s"]]
    return ratios


def test_the_attention_factor_gives_back_the_grids_profiled_calls() -> None:
    # NB: the grid's calls make 7.8 (head size 128, fp16/bf16) to 62 (head size 32, fp32)
    # blocks per SM: the parallel curve's slowdown at its own blocks is divided out of each
    # row's factor, not counted a second time (head size 128 was 5-10% over, 32 3-5% under)
    ratios = _profiled_over_modelled("attention_grid", lambda row: row["length"] == 1024)
    assert len(ratios) == 2 * 3 * 3 * 3
    # fp16 and bf16 share one factor (the median of both)
    assert all(0.98 < ratio < 1.02 for ratio in ratios)


def test_the_attention_factor_with_few_problems_stays_near_their_profiled_calls() -> None:
    # NB: the slowdown is over the model's time, fixed costs included: per FLOP it made one
    # bf16 causal problem of 512 tokens 11x its profiled forward. The curve is by blocks per
    # SM alone, so lengths of one block count still differ (up to 1.8x here)
    ratios = _profiled_over_modelled(
        "attention_parallel", lambda row: row["shape"][0] * row["shape"][1] <= 4
    )
    assert len(ratios) == 2 * 2 * 3 * 3 * 3
    assert all(0.7 < ratio < 1.85 for ratio in ratios)
