"""cuDNN RNN emulation: the reserve-space formula per mode and the buffers a traced step makes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainfit import TrainSpec
from trainfit.errors import TraceError
from trainfit.trace.costs import OpKind
from trainfit.trace.kernels.cudnn_rnn import (
    DROPOUT_STATE_BYTES,
    LIBRARY_OP,
    RnnMode,
    RnnShape,
    reserve_bytes,
    rnn_cost,
    workspace_bytes,
)
from trainfit.trace.step import Category, trace_step
from trainfit.trace.target import Target
from trainfit.training import Phase

LSTM = "trainfit.models.zoo:melody_lstm"


HERE = "tests.trace.kernels.test_cudnn_rnn"
"""This module's import path: the tests' model factories are loaded through it."""


def _shape(
    i: int,
    h: int,
    layers: int,
    b: int,
    t: int,
    p: float,
    d: int = 1,
    el: int = 4,
    mode: RnnMode = RnnMode.LSTM,
    proj: int = 0,
):
    return RnnShape(
        mode=mode, input_size=i, hidden=h, proj=proj, layers=layers, directions=d, seq=t, batch=b,
        element=el, dropout=p,
    )  # fmt: skip


GRU, TANH, RELU = RnnMode.GRU, RnnMode.RNN_TANH, RnnMode.RNN_RELU


@pytest.mark.parametrize(
    ("shape", "measured"),
    [
        # reserve spaces read off the H100 probe (benchmarks/accuracy/results/cudnn_probe_h100)
        (_shape(256, 256, 4, 32, 256, 0.2), 193_724_672),
        (_shape(128, 384, 2, 16, 200, 0.1), 54_221_056),
        (_shape(300, 300, 3, 20, 150, 0.5), 61_425_280),  # dropout mask rounded to 16 bytes
        (_shape(128, 384, 2, 16, 200, 0.1, d=2), 108_749_056),
        (_shape(512, 256, 3, 48, 64, 0.3, el=2), 26_935_552),
        (_shape(96, 192, 1, 24, 300, 0.0), 27_648_256),
    ],
)
def test_reserve_matches_probe(shape: RnnShape, measured: int) -> None:
    assert reserve_bytes(shape) == measured


# Per mode, hand-derived: (layers * (states * H + H) - H) * D * T * B * element, the states being
# 6 for GRU and 1 for RNN; plus each layer's dropout mask (D * (L - 1) masks of T*B*D*H bits,
# rounded to 16 bytes), plus 256.
@pytest.mark.parametrize(
    ("shape", "derived", "measured"),
    [
        # reserve spaces read off the same H100 probe
        (
            _shape(128, 384, 2, 16, 200, 0.1, mode=GRU),
            (2 * 7 * 384 - 384) * 200 * 16 * 4 + 200 * 16 * 384 // 8 + 256,
            64_051_456,
        ),
        (
            _shape(96, 192, 1, 24, 300, 0.0, mode=GRU),
            (7 * 192 - 192) * 300 * 24 * 4 + 256,
            33_177_856,
        ),
        (
            _shape(512, 256, 3, 48, 64, 0.3, d=2, mode=GRU),
            (3 * 7 * 256 - 256) * 2 * 64 * 48 * 4 + 2 * 2 * (64 * 48 * 2 * 256 // 8) + 256,
            126_615_808,
        ),
        (
            _shape(128, 384, 2, 16, 200, 0.1, mode=TANH),
            (2 * 2 * 384 - 384) * 200 * 16 * 4 + 200 * 16 * 384 // 8 + 256,
            14_899_456,
        ),
        (
            _shape(256, 1024, 1, 8, 50, 0.0, mode=TANH),
            (2 * 1024 - 1024) * 50 * 8 * 4 + 256,
            1_638_656,
        ),
        (
            _shape(512, 256, 3, 48, 64, 0.3, d=2, mode=TANH),
            (3 * 2 * 256 - 256) * 2 * 64 * 48 * 4 + 2 * 2 * (64 * 48 * 2 * 256 // 8) + 256,
            32_243_968,
        ),
    ],
)
def test_gru_and_rnn_reserve_matches_probe(shape: RnnShape, derived: int, measured: int) -> None:
    assert derived == measured
    assert reserve_bytes(shape) == measured


def test_relu_rnn_has_the_tanh_layout() -> None:
    # no probe of RNN_RELU: cuDNN lays it out as RNN_TANH
    tanh, relu = (
        _shape(300, 300, 3, 20, 150, 0.5, mode=TANH),
        _shape(300, 300, 3, 20, 150, 0.5, mode=RELU),
    )
    assert reserve_bytes(relu) == reserve_bytes(tanh) == 18_225_280
    assert workspace_bytes(relu) == workspace_bytes(tanh)


def test_projected_lstm_reserve_is_derived_from_the_layout() -> None:
    # no probe: the projected output (P = 128) takes the hidden output's place beside the gates
    # and cell state, (L * (5H + P) - P) * T * B * element; its dropout mask is over P
    shape = _shape(256, 512, 2, 64, 256, 0.2, proj=128)
    mask = 256 * 64 * 128 // 8
    assert reserve_bytes(shape) == (2 * (5 * 512 + 128) - 128) * 256 * 64 * 4 + mask + 256


def test_rnn_cost_counts_each_modes_gates() -> None:
    lstm = rnn_cost(_shape(256, 512, 1, 8, 10, 0.0), backward=False)
    gru = rnn_cost(_shape(256, 512, 1, 8, 10, 0.0, mode=GRU), backward=False)
    tanh = rnn_cost(_shape(256, 512, 1, 8, 10, 0.0, mode=TANH), backward=False)
    assert lstm.flops == 2 * 10 * 8 * 4 * 512 * (256 + 512)
    assert (gru.flops, tanh.flops) == (lstm.flops * 3 // 4, lstm.flops // 4)
    assert lstm.kind is gru.kind is OpKind.RNN and gru.kernels == 10
    assert (lstm.gates, gru.gates, tanh.gates) == (4, 3, 1)


def test_workspace_fit_is_within_its_stated_range_at_a_probe_point() -> None:
    # measured 101,974,528 B (held out of the fit); the fit's typical error is 25%
    ratio = workspace_bytes(_shape(256, 256, 4, 32, 256, 0.2)) / 101_974_528
    assert 0.75 < ratio < 1.35


@pytest.fixture(scope="module")
def lstm_trace():
    return trace_step(TrainSpec(model=LSTM, batch=2, precision="fp32"))


def test_lstm_weights_are_one_flat_buffer(lstm_trace) -> None:
    params = [
        e for e in lstm_trace.events if e.alloc and lstm_trace.category(e) is Category.PARAMETERS
    ]
    # 4 layers x (w_ih, w_hh, b_ih, b_hh) copied, then one flat buffer of their sum
    flat = 4 * (2 * 1024 * 256 + 2 * 1024) * 4
    assert flat in [e.nbytes for e in params]
    setup = lstm_trace.events[
        : lstm_trace.events.index(next(e for e in lstm_trace.events if e.phase is Phase.FORWARD))
    ]
    freed = {e.key for e in setup if not e.alloc}
    assert sum(e.nbytes for e in params if e.key in freed) == flat


def test_lstm_reserve_lives_from_forward_to_backward(lstm_trace) -> None:
    events = lstm_trace.events
    batch, seq = 2, 256
    size = reserve_bytes(_shape(256, 256, 4, batch, seq, 0.2))
    allocs = [i for i, e in enumerate(events) if e.alloc and e.nbytes == size]
    assert allocs, "no reserve space of the formula's size"
    first = events[allocs[0]]
    assert first.phase is Phase.FORWARD
    free = next(i for i, e in enumerate(events) if not e.alloc and e.key == first.key)
    assert events[free].phase is Phase.BACKWARD and events[free].iteration == first.iteration


def test_lstm_workspaces_and_dropout_state_are_tagged(lstm_trace) -> None:
    library = [e for e in lstm_trace.events if e.alloc and e.op.startswith(LIBRARY_OP)]
    ops = [e.op for e in library if e.iteration == 0]
    # forward, backward data pass, backward weight pass; one dropout state per process
    assert ops.count(LIBRARY_OP + "workspace") == 3
    assert [e.nbytes for e in library if e.op == LIBRARY_OP + "dropout_state"] == [
        DROPOUT_STATE_BYTES
    ]
    assert all(lstm_trace.category(e) is Category.WORKSPACES for e in library)


def test_lstm_gradients_share_one_flat_buffer(lstm_trace) -> None:
    grads = {
        e.key for e in lstm_trace.events if e.alloc and lstm_trace.category(e) is Category.GRADIENTS
    }
    sizes = sorted(e.nbytes for e in lstm_trace.events if e.alloc and e.key in grads)
    assert 4 * (2 * 1024 * 256 + 2 * 1024) * 4 in sizes


def test_lstm_under_autocast_and_on_the_cpu_target_traces() -> None:
    trace_step(TrainSpec(model=LSTM, batch=2, precision="bf16"))
    cpu = trace_step(TrainSpec(model=LSTM, batch=2, precision="fp32"), target=Target.cpu())
    assert not any(e.op.startswith(LIBRARY_OP) for e in cpu.events)


class _TokenRnn(nn.Module):
    def __init__(self, rnn: nn.Module, width: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 32)
        self.rnn = rnn
        self.head = nn.Linear(width, 50)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out = self.rnn(self.embed(tokens))[0]
        return nn.functional.cross_entropy(self.head(out).flatten(0, 1), tokens.flatten())


def gru_model() -> nn.Module:
    return _TokenRnn(nn.GRU(32, 48, num_layers=2, dropout=0.1, batch_first=True), 48)


def relu_rnn_model() -> nn.Module:
    rnn = nn.RNN(32, 48, nonlinearity="relu", bidirectional=True, batch_first=True)
    return _TokenRnn(rnn, 96)


def proj_lstm_model() -> nn.Module:
    return _TokenRnn(nn.LSTM(32, 48, num_layers=2, proj_size=16, batch_first=True), 16)


class _PackedGru(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 32)
        self.rnn = nn.GRU(32, 48, batch_first=True)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # a PackedSequence built by hand (pack_padded_sequence itself needs real lengths)
        steps = self.embed(tokens).transpose(0, 1).flatten(0, 1)
        batch_sizes = torch.full((tokens.shape[1],), tokens.shape[0], dtype=torch.int64)
        packed = nn.utils.rnn.PackedSequence(steps, batch_sizes)
        return self.rnn(packed)[0].data.sum()


def packed_gru_model() -> nn.Module:
    return _PackedGru()


@pytest.mark.parametrize(
    ("factory", "shape"),
    [
        ("gru_model", _shape(32, 48, 2, 4, 16, 0.1, mode=GRU)),
        ("relu_rnn_model", _shape(32, 48, 1, 4, 16, 0.0, d=2, mode=RELU)),
        ("proj_lstm_model", _shape(32, 48, 2, 4, 16, 0.0, proj=16)),
    ],
)
def test_every_mode_is_traced_through_cudnns_emulation(factory: str, shape: RnnShape) -> None:
    spec = TrainSpec(model=f"{HERE}:{factory}", inputs=("tokens=B,16:int64<50",), batch=4)
    trace = trace_step(spec)
    reserves = [e for e in trace.events if e.alloc and e.nbytes == reserve_bytes(shape)]
    assert reserves and reserves[0].phase is Phase.FORWARD
    workspaces = [e for e in trace.events if e.alloc and e.op == LIBRARY_OP + "workspace"]
    assert len(workspaces) == 3 * 2  # forward, backward data and weight passes; 2 iterations
    rnn = [op for op in trace.costs.table if op.kind is OpKind.RNN]
    assert rnn, "no fused recurrent kernel charged"


def test_a_packed_sequence_is_one_trace_error_naming_the_module() -> None:
    spec = TrainSpec(model=f"{HERE}:packed_gru_model", inputs=("tokens=B,16:int64<50",), batch=4)
    with pytest.raises(
        TraceError, match=r"module 'rnn': cuDNN's gru over a packed sequence .* not emulated"
    ):
        trace_step(spec)


def test_a_gru_under_autocast_keeps_a_half_precision_reserve() -> None:
    spec = TrainSpec(
        model=f"{HERE}:gru_model",
        inputs=("tokens=B,16:int64<50",),
        batch=4,
        precision="bf16",
    )
    trace = trace_step(spec)
    half = reserve_bytes(_shape(32, 48, 2, 4, 16, 0.1, el=2, mode=GRU))
    assert [e.phase for e in trace.events if e.alloc and e.nbytes == half] == [Phase.FORWARD] * 2
