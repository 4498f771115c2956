"""The steady iteration replayed from the first one's passes equals a full trace of it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainfit import TrainSpec
from trainfit.trace.step import StepTrace, trace_step

ZOO = "trainfit.models.zoo"


def _canonical(trace: StepTrace) -> tuple[list[tuple[object, ...]], list[tuple[int, str]]]:
    """Events with keys renumbered by first appearance; teardown frees left out (their order
    depends on which Python object is released first when the trace ends)."""
    numbers: dict[int, int] = {}
    events = []
    for event in trace.events:
        number = numbers.setdefault(event.key, len(numbers))
        category = trace.category(event).value if event.alloc else ""
        events.append(
            (
                number,
                event.nbytes,
                event.alloc,
                event.phase.value,
                event.iteration,
                event.op,
                category,
            )
        )
    last_alloc = max(i for i, e in enumerate(events) if e[2])
    return events[: last_alloc + 1], [(w.index, w.thread.value) for w in trace.workspaces]


SPECS = {
    "mlp-fp32": dict(model=f"{ZOO}:emotion_mlp", batch=64, precision="fp32"),
    "transformer-bf16-accum": dict(
        model=f"{ZOO}:melody_transformer", batch=2, seq_len=64, precision="bf16", grad_accum=3
    ),
    "transformer-ckpt-bf16-clip": dict(
        model=f"{ZOO}:melody_transformer",
        batch=2,
        seq_len=64,
        precision="bf16",
        checkpointing=True,
        grad_clip=1.0,
    ),
    "vq-sgd-pure-bf16": dict(
        model=f"{ZOO}:vq_patch_autoencoder", batch=2, precision="pure-bf16", optimizer="sgd"
    ),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_replayed_steady_iteration_equals_full_trace(name: str) -> None:
    spec = TrainSpec(**SPECS[name])
    full = trace_step(spec, reuse_passes=False)
    reused = trace_step(spec)
    assert reused.replayed_passes
    assert not full.replayed_passes
    assert _canonical(reused) == _canonical(full)


def lazy_state_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """A user step that makes a buffer on its first call (as a lazily built reference would)."""
    if not hasattr(model, "_lazy_buffer"):
        model._lazy_buffer = torch.zeros(4096)
    return model(**batch).float().mean()


def test_a_pass_that_keeps_new_state_is_traced_in_full() -> None:
    # the first pass keeps a tensor that is not a gradient: the steady iteration is traced
    spec = TrainSpec(
        model=f"{ZOO}:emotion_mlp", batch=64, step_fn="tests.trace.test_reuse:lazy_state_step"
    )
    assert not trace_step(spec).replayed_passes


def test_fp16_with_grad_scaler_is_replayed() -> None:
    spec = TrainSpec(model=f"{ZOO}:emotion_mlp", batch=64, precision="fp16", grad_clip=1.0)
    full = trace_step(spec, reuse_passes=False)
    reused = trace_step(spec)
    assert reused.replayed_passes
    assert _canonical(reused) == _canonical(full)


COPIED = {
    "transformer-ckpt-accum-clip": dict(
        model=f"{ZOO}:melody_transformer",
        batch=2,
        seq_len=64,
        precision="bf16",
        checkpointing=True,
        grad_clip=1.0,
        grad_accum=2,
    ),
    "conv-fp16-scaler": dict(model=f"{ZOO}:redimnet_like", batch=2, precision="fp16"),
    "vq-pure-bf16": dict(model=f"{ZOO}:vq_patch_autoencoder", batch=2, precision="pure-bf16"),
    "lstm-not-replayable": dict(model=f"{ZOO}:melody_lstm", batch=4, seq_len=32),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COPIED))
@pytest.mark.parametrize(
    ("source", "target"), [("adamw", "adamw-8bit"), ("adamw-8bit", "sgd"), ("sgd", "adafactor")]
)
def test_passes_copied_from_another_optimizer_equal_a_full_trace(
    name: str, source: str, target: str
) -> None:
    settings = COPIED[name]
    donor = trace_step(TrainSpec(**settings, optimizer=source))
    full = trace_step(TrainSpec(**settings, optimizer=target))
    copied = trace_step(TrainSpec(**settings, optimizer=target), passes_from=donor)
    assert bool(donor.passes) == (name != "lstm-not-replayable")
    assert _canonical(copied) == _canonical(full)
    assert (copied.attention, copied.attention_calls) == (full.attention, full.attention_calls)
    assert copied.assumptions == full.assumptions
    assert copied.ops < full.ops or not donor.passes  # the passes were not traced again
