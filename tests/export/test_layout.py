"""`trainfit.export.layout`: the trainer layout's decisions and errors."""

from __future__ import annotations

import pytest

from tests.export.support import NO, SHARDED, _device, _hand_plan, _of
from trainfit.errors import SpecError, TrainfitError
from trainfit.export.hf import hf_training_arguments
from trainfit.export.layout import NoTf32, PlannedGpus, RoundedBatch, trainer_layout
from trainfit.export.write import write_exports
from trainfit.plan.options import Plan
from trainfit.spec import Precision


def test_a_batch_that_does_not_split_over_the_gpus(small: Plan) -> None:
    with pytest.raises(SpecError, match="effective batch of 64 does not split over 3 GPUs"):
        trainer_layout(small, _of(small, "h100"), gpus=3)
    with pytest.raises(SpecError, match="CUDA GPUs only"):
        trainer_layout(small, _of(small, "cpu"), gpus=2)


def test_a_sharded_batch_that_rounds_up_says_so() -> None:
    lay = trainer_layout(_hand_plan(SHARDED, batch=30), SHARDED)
    assert (lay.micro_batch, lay.grad_accum, lay.effective_batch) == (1, 8, 32)
    assert RoundedBatch(asked=30, micro_batch=1, grad_accum=8, gpus=4) in lay.notes
    lay = trainer_layout(_hand_plan(SHARDED), SHARDED, gpus=8)
    assert lay.gpus == 4 and PlannedGpus(planned=4, asked=8) in lay.notes


def test_tf32_precision_before_ampere_runs_as_fp32() -> None:
    t4 = _device("t4", precision=Precision.TF32)
    lay = trainer_layout(_hand_plan(t4), t4)
    assert not lay.tf32 and "tf32" not in hf_training_arguments(lay)
    assert NoTf32(device="t4") in lay.notes


def test_a_device_that_does_not_fit_has_nothing_to_export() -> None:
    with pytest.raises(TrainfitError, match="t4: does not fit; nothing to export"):
        trainer_layout(_hand_plan(NO), NO)
    with pytest.raises(TrainfitError, match="nothing to export: t4: does not fit"):
        write_exports(_hand_plan(NO), ["hf"], "unused")
