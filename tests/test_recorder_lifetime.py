"""A finished trace's events stay as traced, whatever the garbage collector frees later.

Regression: the recorder's storage finalizers outlived the trace and appended free events to
the list the `StepTrace` shared; a cycle collected later (gc on) then made a scaling's base
trace longer than its per-event growth (`memory/scaling.py` `_sizes`: "zip() argument 2 is
shorter than argument 1"), seen planning seed 001 in one process with gc enabled.
"""

from __future__ import annotations

import gc

import torch

from trainfit.estimator.scaling import scale_batch
from trainfit.spec import TrainSpec
from trainfit.trace.recorder import Recorder


def _cycle_holding(tensor: torch.Tensor) -> None:
    """Put `tensor` in a reference cycle only the garbage collector can break."""
    holder: list[object] = [tensor]
    holder.append(holder)


def test_a_storage_freed_after_finish_adds_no_event() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        recorder = Recorder()
        tensor = torch.empty(64)
        recorder.track(tensor, "op")
        _cycle_holding(tensor)
        del tensor
        events = recorder.events
        recorder.finish()
        gc.collect()  # frees the storage in the cycle
        assert [e.alloc for e in events] == [True]
    finally:
        if was:
            gc.enable()


def test_a_storage_freed_before_finish_is_recorded() -> None:
    recorder = Recorder()
    tensor = torch.empty(64)
    recorder.track(tensor, "op")
    del tensor
    assert [e.alloc for e in recorder.events] == [True, False]


def test_scaling_survives_cycles_collected_after_its_traces() -> None:
    spec = TrainSpec(
        model="trainfit.models.zoo:melody_transformer", batch=2, seq_len=64, device="rtx-4060"
    )
    scaling = scale_batch(spec)
    assert scaling.affine
    count = len(scaling.base.events)
    # objects the trace left alive in cycles are collected now, after the trace
    gc.collect()
    assert len(scaling.base.events) == count == len(scaling.per_sample)
    assert len(scaling.trace_at(7).events) == count
