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


class _Block(nn.Module):
    """Pre-LN decoder block with attention dropout through F.scaled_dot_product_attention."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A user's small GPT (separate q/k/v views, attention dropout, tied head)."""

    def __init__(self, vocab: int = 1000, dim: int = 512, heads: int = 8, layers: int = 8) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(1024, dim)
        self.blocks = nn.ModuleList(_Block(dim, heads, 0.1) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return (self.ln(x) @ self.tok.weight.t()).flatten(0, 1)


def tiny_gpt() -> nn.Module:
    """Factory for `benchmarks.accuracy.user_steps:tiny_gpt` (about 30M parameters)."""
    return TinyGPT()
