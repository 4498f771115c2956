"""Checkpointing a plain module: the blocks of every ModuleList not inside another."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.estimator.step import estimate
from trainfit.models.source import build_program
from trainfit.spec import TrainSpec
from trainfit.training import enable_checkpointing

VQ = "trainfit.models.zoo:vq_patch_autoencoder"


def test_an_encoder_and_a_decoder_list_are_both_checkpointed() -> None:
    program = build_program(TrainSpec(model=VQ, device="rtx-4060"), "meta")
    names = enable_checkpointing(program, None)
    assert names == [*(f"encoder_blocks.{i}" for i in range(4)),
                     *(f"decoder_blocks.{i}" for i in range(4))]  # fmt: skip


def test_lists_inside_a_block_are_left_to_their_block() -> None:
    program = build_program(
        TrainSpec(model="trainfit.models.zoo:redimnet_like", device="h100"), "meta"
    )
    names = enable_checkpointing(program, None)
    assert names and all(n.count(".") == 1 and n.startswith("stages.") for n in names)


def test_checkpointing_the_vq_autoencoder_drops_most_kept_activations() -> None:
    def kept(checkpointing: bool) -> int:
        spec = TrainSpec(model=VQ, batch=16, multiplier=16, checkpointing=checkpointing,
                         device="rtx-4060")  # fmt: skip
        return estimate(spec).breakdown.activations

    # NB: with the encoder's list only (the decoder holds the larger maps) it kept 0.53 of 0.54 GiB
    assert kept(True) < 0.5 * kept(False)


class _Doubles(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def _frozen() -> nn.Module:
    model = nn.Linear(4, 4)
    model.requires_grad_(False)
    return model


@pytest.mark.parametrize(
    ("model", "freeze", "message"),
    [
        (_Doubles(), (), "_Doubles has no parameters: there is nothing to train"),
        (
            _frozen(),
            (),
            "every parameter of Linear has requires_grad=False (set by the model itself): "
            "there is nothing to train; leave some trainable in the model's factory",
        ),
        (nn.Linear(4, 4), ("*",), "the freeze patterns ['*'] freeze every parameter"),
    ],
)
def test_nothing_left_to_train_says_why(
    model: nn.Module, freeze: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SpecError) as raised:
        estimate(model=model, sample=torch.randn(2, 4), freeze=freeze, device="rtx-4060")
    assert str(raised.value) == message
