"""The report tests' model (a wide MLP: fits an 8 GB GPU, not a 1 GB one), the 1 GiB test
GPU's catalog, the claims checked against the plan, and the helpers the tests share."""

from __future__ import annotations

from torch import nn

from trainfit.plan.options import Plan

GIB = 2**30
MODEL = "tests.report.document.wide:wide_mlp"
INPUT = "input=B,64,2048:float32"
TINY = {
    "devices": {
        "tiny-gpu": {
            "display": "Tiny test GPU 1 GB",
            "kind": "cuda",
            "architecture": "ada",
            "runtime_profile": "modelled-from-hopper",
            "memory_gb": 1,
            "compute_capability": [8, 9],
        }
    }
}
"""A 1 GiB GPU the model's weights, gradients and AdamW state alone (0.5 GiB) plus the CUDA
context do not fit."""


def wide_mlp() -> nn.Module:
    """34M parameters: fits an 8 GB GPU, not a 1 GB one; 64 rows a sample, so the largest
    micro-batch is a few hundred on the 8 GB GPU."""
    return nn.Sequential(nn.Linear(2048, 8192), nn.ReLU(), nn.Linear(8192, 2048))


CLAIMS = (
    {
        "what": "peak memory on the RTX 4060",
        "device": "rtx-4060",
        "quantity": "memory_gib",
        "value": 99.0,
        "source": "seed §RTX 4060",
        "why": "the document counts the whole card",
        "reason": "whole_system",
    },
    {"what": "model size", "quantity": "params_millions", "value": [30, 40], "source": "seed"},
)


def _device(p: Plan, name: str):
    return next(d for d in p.devices if d.device == name)


def _headings(md: str) -> list[str]:
    """The Markdown's headings (not the comments of its code blocks)."""
    found, code = [], False
    for line in md.splitlines():
        code ^= line.startswith("```")
        if line.startswith("#") and not code:
            found.append(line)
    return found
