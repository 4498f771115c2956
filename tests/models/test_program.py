"""A transformers model's own checkpointing, under its name of the installed release: the new
`activation_checkpointing_*` where it exists (the old `gradient_checkpointing_*` warns there)."""

from __future__ import annotations

import pytest
from torch import nn

from trainfit.models.program import (
    hf_checkpointing,
    hf_checkpointing_disable,
    hf_checkpointing_enable,
)


class _Old(nn.Module):
    """A model of a transformers release before the rename."""

    def __init__(self) -> None:
        super().__init__()
        self.on: dict[str, object] | None = None

    def gradient_checkpointing_enable(self, kwargs: dict[str, object] | None = None) -> None:
        self.on = kwargs or {}

    def gradient_checkpointing_disable(self) -> None:
        self.on = None

    @property
    def is_gradient_checkpointing(self) -> bool:
        return self.on is not None


class _New(_Old):
    """A release with the new names, whose old ones warn."""

    def gradient_checkpointing_enable(self, kwargs: dict[str, object] | None = None) -> None:
        raise AssertionError("the deprecated name was called")

    def activation_checkpointing_enable(self, kwargs: dict[str, object] | None = None) -> None:
        self.on = kwargs or {}

    def activation_checkpointing_disable(self) -> None:
        self.on = None

    @property
    def is_gradient_checkpointing(self) -> bool:
        raise AssertionError("the deprecated property was read")

    @property
    def is_activation_checkpointing(self) -> bool:
        return self.on is not None


@pytest.mark.parametrize("kind", [_Old, _New])
def test_checkpointing_goes_through_the_releases_own_name(kind: type[_Old]) -> None:
    model = kind()
    assert hf_checkpointing(model) is False
    hf_checkpointing_enable(model, {"use_reentrant": False})
    assert model.on == {"use_reentrant": False} and hf_checkpointing(model) is True
    hf_checkpointing_disable(model)
    assert hf_checkpointing(model) is False


def test_a_plain_module_has_no_transformers_checkpointing() -> None:
    assert hf_checkpointing(nn.Linear(2, 2)) is False
