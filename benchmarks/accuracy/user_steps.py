"""User-side code the accuracy suite reaches through import paths, as a user's project would.

`dpo_step` is a DPO-style preference step: the policy and a frozen reference copy each score a
chosen and a rejected sequence per pair; only the policy trains.
"""

from __future__ import annotations

import copy
import weakref

import torch
import torch.nn.functional as F
from torch import nn

_REFERENCES: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()


def _reference(policy: nn.Module) -> nn.Module:
    ref = _REFERENCES.get(policy)
    if ref is None:
        ref = copy.deepcopy(policy)
        ref.requires_grad_(False)
        ref.eval()
        _REFERENCES[policy] = ref
    return ref


def _sequence_logps(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=ids).logits[:, :-1].float()
    logps = torch.log_softmax(logits, dim=-1)
    return logps.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1).sum(-1)


def dpo_step(model: nn.Module, batch: dict[str, torch.Tensor], beta: float = 0.1) -> torch.Tensor:
    """DPO loss for pairs (chosen = input_ids, rejected = input_ids rolled by one row)."""
    chosen = batch["input_ids"]
    rejected = torch.roll(chosen, shifts=1, dims=0)
    pairs = torch.cat([chosen, rejected], dim=0)
    n = chosen.shape[0]
    policy = _sequence_logps(model, pairs)
    with torch.no_grad():
        ref = _sequence_logps(_reference(model), pairs)
    margin = (policy[:n] - ref[:n]) - (policy[n:] - ref[n:])
    return -F.logsigmoid(beta * margin).mean()


class TinyConvNet(nn.Module):
    """A small plain CNN classifier for the import-path cases."""

    def __init__(self, classes: int = 100) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.GELU())
            for cin, cout in [(3, 64), (64, 128), (128, 128), (128, 256)]
        )
        self.head = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=(2, 3)))


def tiny_convnet() -> nn.Module:
    """Factory for `benchmarks.accuracy.user_steps:tiny_convnet`."""
    return TinyConvNet()


def mse_loss(output: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """A user loss: regress every logit to zero."""
    return output.float().pow(2).mean()
