"""`trainfit.autofitter.apply`: what autofit does to the model itself: checkpointing (named
blocks, the largest module list, transformers' own) and freezing.

CPU only: "cpu" runs for real (confirm included); GPU catalog devices are estimated only.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.autofitter.support import MLP, gpt2_sample, mlp_sample, tiny_gpt2
from trainfit.autofitter import autofit
from trainfit.errors import SpecError
from trainfit.models.live import CHECKPOINT_MARK


@pytest.mark.slow
def test_checkpointing_named_blocks_of_a_plain_module() -> None:
    model = MLP()
    x = torch.randn(4, 32)
    plain = model(x)
    fit = autofit(model, x, 8, device="h100", checkpointing=True, checkpoint_modules="blocks.[0-9]")
    assert fit.checkpointed == ("blocks.0", "blocks.1", "blocks.2")
    assert fit.spec.checkpoint_modules == "blocks.[0-9]"
    wrapped = [
        n for n, m in model.named_modules() if CHECKPOINT_MARK in dir(vars(m).get("forward"))
    ]
    assert wrapped == ["blocks.0", "blocks.1", "blocks.2"]
    out = model(x)
    assert torch.allclose(out, plain)
    out.sum().backward()
    assert model.stem.weight.grad is not None
    unwrapped = fit.replan(checkpointing=False, checkpoint_modules=None)
    assert unwrapped.checkpointed == () and not unwrapped.checkpointing
    assert all("forward" not in vars(m) for m in model.modules())


def test_checkpointing_defaults_to_the_largest_module_list() -> None:
    model = MLP()
    fit = autofit(model, mlp_sample(), 8, loss_fn=F.cross_entropy, checkpointing=True)
    assert fit.checkpointed == ("blocks.0", "blocks.1", "blocks.2")
    assert fit.spec.checkpointing and fit.spec.checkpoint_modules is None
    with pytest.raises(SpecError, match=r"has no nn.ModuleList .*checkpoint_modules="):
        autofit(nn.Sequential(nn.Linear(32, 4)), torch.randn(2, 32), 8, checkpointing=True)


@pytest.mark.slow
def test_transformers_checkpointing_on_a_gpt2() -> None:
    model = tiny_gpt2()
    fit = autofit(model, gpt2_sample(), 16, device="h100", checkpointing=True)
    assert model.is_gradient_checkpointing
    assert fit.checkpointed == (
        "transformers' gradient checkpointing (each decoder/encoder layer)",
    )
    assert model.config.use_cache is False
    again = fit.replan(checkpointing=False)
    assert not model.is_gradient_checkpointing and not again.checkpointing


@pytest.mark.slow
def test_a_tied_weight_is_frozen_by_either_name() -> None:
    model = tiny_gpt2()
    fit = autofit(model, gpt2_sample(), 4, device="cpu", freeze=["lm_head.*"])
    assert not model.transformer.wte.weight.requires_grad
    assert fit.trainable_parameters == fit.parameters - 128 * 64
