"""The autofit tests' models and sample batches: an MLP of three blocks (with the factory and
step of its equivalent spec) and a tiny GPT-2."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[2]


class MLP(nn.Module):
    """Three blocks in a ModuleList and a head: the blocks are what checkpointing wraps."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(32, 64)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(3))
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_mlp() -> MLP:
    """The factory of the spec equivalent to an autofit of MLP."""
    return MLP()


def mlp_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The step autofit runs for `(x, y)` batches and loss_fn=F.cross_entropy."""
    return F.cross_entropy(model(batch["input_0"]), batch["input_1"])


MLP_INPUTS = ("input_0=B,32:float32", "input_1=B:int64<10")


def mlp_sample(rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.arange(rows) % 10
    y[0] = 9
    return torch.randn(rows, 32), y


def tiny_gpt2() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=2,
        vocab_size=128,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config)


def gpt2_sample(rows: int = 2) -> dict[str, torch.Tensor]:
    ids = torch.randint(128, (rows, 32))
    return {"input_ids": ids, "labels": ids}
