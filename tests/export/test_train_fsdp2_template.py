"""The exported torchrun script's model building (src/trainfit/export/templates/train_fsdp2.py):
a model built on the meta device keeps its tied weights when DDP materialises it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

TEMPLATE = (
    Path(__file__).parents[2] / "src" / "trainfit" / "export" / "templates" / "train_fsdp2.py"
)


def template() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_fsdp2_template", TEMPLATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Tied(nn.Module):
    """An embedding and an output head sharing one weight (Llama-3.2-1B, qwen2, gpt2)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 4)
        self.head = nn.Linear(4, 16, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.LayerNorm(4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(ids)))


def test_to_empty_unties_and_retie_restores_one_weight() -> None:
    t = template()
    with t.parameters_on_meta():
        model = Tied()
    assert model.head.weight is model.embed.weight
    tied = t.tied_parameters(model)
    assert tied == [(model.head, "weight", model.embed, "weight")]
    t.materialise(model, torch.device("cpu"))
    # NB: what the 4-GPU DDP run of Llama-3.2-1B trained: two weights, two gradients, two states
    assert model.head.weight is not model.embed.weight
    t.retie(tied)
    assert model.head.weight is model.embed.weight
    assert len(list(model.parameters())) == 3  # embed/head weight, norm weight and bias
    assert not model.embed.weight.is_meta


def test_an_untied_model_has_nothing_to_retie() -> None:
    t = template()
    with t.parameters_on_meta():
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    assert t.tied_parameters(model) == []
