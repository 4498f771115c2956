"""`trainfit.autofitter.fit`: a fit's re-plan for a new stage and the micro-batches of a step.

CPU only: "cpu" runs for real (confirm included); GPU catalog devices are estimated only.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.autofitter.support import MLP, gpt2_sample, mlp_sample, tiny_gpt2
from trainfit.autofitter import Fit, autofit
from trainfit.errors import SpecError


@pytest.mark.slow
def test_stage_switch_replans_with_everything_trainable() -> None:
    model = tiny_gpt2()
    frozen = autofit(
        model, gpt2_sample(), 32, device="rtx-4060", freeze=["transformer.h.*"], checkpointing=False
    )
    assert all(not p.requires_grad for p in model.transformer.h.parameters())
    assert model.transformer.wte.weight.requires_grad
    everything = frozen.replan(freeze=())
    assert all(p.requires_grad for p in model.parameters())
    assert frozen.trainable_parameters < everything.trainable_parameters == everything.parameters
    assert everything.predicted_bytes > frozen.predicted_bytes
    assert (everything.micro_batch, everything.grad_accum) == (32, 1)
    assert "of 112.4 k parameters trained" in frozen.summary
    back = everything.replan(freeze=["transformer.h.*"])
    assert back.trainable_parameters == frozen.trainable_parameters


def test_split_gives_the_micro_batches_of_a_step() -> None:
    fit = autofit(MLP(), mlp_sample(), 12, loss_fn=F.cross_entropy, micro_batch=4)
    assert isinstance(fit, Fit) and (fit.micro_batch, fit.grad_accum) == (4, 3)
    x, y = mlp_sample(12)
    parts = list(fit.split((x, y)))
    assert [tuple(p[0].shape) for p in parts] == [(4, 32)] * 3
    assert torch.equal(torch.cat([p[1] for p in parts]), y)
    parts = list(fit.split({"x": x, "flag": True}))
    assert [p["x"].shape[0] for p in parts] == [4, 4, 4] and parts[0]["flag"] is True
    optimizer = fit.make_optimizer(lr=0.01)
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["lr"] == 0.01
    with fit.autocast():
        pass


def test_split_refuses_a_batch_of_other_rows() -> None:
    fit = autofit(MLP(), mlp_sample(), 8, loss_fn=F.cross_entropy, micro_batch=4, device="cpu")
    assert len(list(fit.split(mlp_sample(8)))) == fit.grad_accum == 2
    with pytest.raises(SpecError, match=r"effective_batch=8 rows \(4 x 2\), got 20 rows"):
        list(fit.split(mlp_sample(20)))
