"""cuDNN LSTM emulation: the reserve-space formula and the buffers a traced LSTM step makes."""

from __future__ import annotations

import pytest

from trainfit import TrainSpec
from trainfit.trace.kernels.cudnn_rnn import (
    DROPOUT_STATE_BYTES,
    LIBRARY_OP,
    LstmShape,
    reserve_bytes,
    workspace_bytes,
)
from trainfit.trace.step import Category, trace_step
from trainfit.trace.target import Target
from trainfit.training import Phase

LSTM = "trainfit.models.zoo:melody_lstm"


def _shape(i: int, h: int, layers: int, b: int, t: int, p: float, d: int = 1, el: int = 4):
    return LstmShape(
        input_size=i, hidden=h, layers=layers, directions=d, seq=t, batch=b, element=el, dropout=p
    )


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
def test_reserve_matches_probe(shape: LstmShape, measured: int) -> None:
    assert reserve_bytes(shape) == measured


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
