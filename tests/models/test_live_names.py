"""How outputs name a live model: by its class, never by its import path; any other model as
it was given."""

from __future__ import annotations

import torch
from torch import nn

from trainfit.models.live import registered
from trainfit.models.live_names import is_live, live_class, model_label, model_name


def test_a_live_model_is_named_by_its_class_even_after_it_is_forgotten() -> None:
    with registered(nn.Linear(4, 2), torch.randn(3, 4)) as live:
        paths = (live.model_path, live.step_path)
    del live
    for path in paths:
        assert is_live(path) and live_class(path) == "Linear"
        assert model_name(path) == "Linear"
        assert model_label(path) == "Linear (live module)"


def test_other_models_are_named_as_given() -> None:
    for model in ("gpt2", "trainfit.models.zoo:emotion_mlp", "/tmp/model", "org/model"):
        assert not is_live(model) and live_class(model) is None
        assert model_name(model) == model_label(model) == model
    stranger = "trainfit.models.live:model_999999"  # NB: registered in no process of ours
    assert model_name(stranger) == "live module" and model_label(stranger) == "a live module"
