"""`trainfit.autofitter.confirm`: the real step on the model itself, undone afterwards."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.autofitter.support import MLP, mlp_sample
from trainfit.autofitter import autofit
from trainfit.models.imports import resolve


@pytest.mark.slow
def test_weights_are_not_copied_and_confirm_restores_them() -> None:
    model = MLP()
    params = list(model.parameters())
    values = [p.detach().clone() for p in params]
    pointers = [p.data_ptr() for p in params]
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    fit = autofit(
        model, mlp_sample(), 8, optimizer=optimizer, loss_fn=F.cross_entropy, confirm=True
    )
    # the estimate traced a meta copy: the registered factory holds no weights
    copy = resolve(fit.spec.model, "model factory")()
    assert all(p.is_meta for p in copy.parameters())
    assert not any(p is q for p in copy.parameters() for q in params)
    # the real step ran on the model itself and was undone
    assert fit.confirmed is not None and fit.confirmed.loss > 0
    assert list(model.parameters()) == params
    assert [p.data_ptr() for p in params] == pointers
    assert all(torch.equal(p, v) for p, v in zip(params, values, strict=True))
    assert all(p.grad is None for p in params)
    assert optimizer.state == {}
    assert "confirmed by one real step on" in fit.summary


class Named(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(32)
        self.body = nn.Sequential(nn.Linear(32, 32), nn.Dropout(0.5))

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        return self.body(self.norm(x)).pow(2).mean()


@pytest.mark.slow
def test_confirm_restores_each_modules_mode_and_takes_mappings_and_namedtuples() -> None:
    import collections

    model = Named()
    model.train()
    model.norm.eval()
    x = torch.randn(4, 32)
    autofit(model, x, 8, device="cpu", confirm=True)
    assert model.training and not model.norm.training and model.body.training

    class Encoding(collections.UserDict):  # NB: transformers' BatchEncoding is a UserDict
        pass

    assert autofit(Named(), Encoding(x=x), 8, device="cpu", confirm=True).confirmed
    Pair = collections.namedtuple("Pair", "x y")
    fit = autofit(Named(), Pair(x, x), 8, device="cpu", micro_batch=4, confirm=True)
    assert fit.confirmed is not None
    parts = list(fit.split(Pair(torch.randn(8, 32), torch.randn(8, 32))))
    assert [type(p).__name__ for p in parts] == ["Pair", "Pair"] and parts[1].x.shape[0] == 4
