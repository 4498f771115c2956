"""The held-out step-time cases: how the GPU harness builds each step, and the TrainSpec trainfit
predicts it with. Chosen after the host floor was fitted (`hostfit.py`); their predictions
(`results/heldout_predictions.json`) were committed before their first run."""

from __future__ import annotations

import importlib
from typing import Any

M = "benchmarks.steptime.models"
VOCAB = 388  # benchmarks.faithful.models.VOCAB

CASES: dict[str, dict[str, Any]] = {
    "dpo-gpt2-fp32ref-b2-s256": dict(
        build=dict(hf="gpt2", dtype="fp32", dpo="fp32", batch=2, seq=256),
        spec=dict(model="gpt2", batch=2, seq_len=256, precision="bf16", preference="dpo"),
    ),
    "lora-r8-gpt2-fp32base-b4-s256": dict(
        build=dict(hf="gpt2", dtype="fp32", lora=8, batch=4, seq=256),
        spec=dict(
            model="gpt2",
            batch=4,
            seq_len=256,
            precision="bf16",
            lora=dict(rank=8),
            weights_dtype="fp32",
        ),
    ),
    "lora-r16-qwen2-0.5b-bf16base-b2-s512": dict(
        build=dict(hf="qwen2-0.5b", dtype="bf16", lora=16, batch=2, seq=512),
        spec=dict(
            model="qwen2-0.5b",
            batch=2,
            seq_len=512,
            precision="bf16",
            lora=dict(rank=16),
            weights_dtype="auto",
        ),
    ),
    "mlp-4x512-b64-adamw-fp32": dict(
        build=dict(factory="mlp_4x512", x=(256,), classes=10, batch=64),
        spec=dict(model=f"{M}:mlp_4x512", inputs=("x=B,256",), batch=64),
    ),
    "mlp-8x256-b32-sgd-fp32": dict(
        build=dict(factory="mlp_8x256", x=(64,), classes=10, batch=32, optim="sgd"),
        spec=dict(model=f"{M}:mlp_8x256", inputs=("x=B,64",), batch=32, optimizer="sgd"),
    ),
    "resnet18-sgd-momentum-fp32-b32": dict(
        build=dict(factory="resnet18", x=(3, 224, 224), classes=1000, batch=32, optim="sgdm"),
        spec=dict(
            model=f"{M}:resnet18",
            inputs=("x=B,3,224,224",),
            batch=32,
            optimizer="sgd-momentum",
        ),
    ),
    "resnet18-bf16-b128": dict(
        build=dict(factory="resnet18", x=(3, 224, 224), classes=1000, batch=128, amp=True),
        spec=dict(model=f"{M}:resnet18", inputs=("x=B,3,224,224",), batch=128, precision="bf16"),
    ),
    "lstm-h128-1l-b32-t64-fp32": dict(
        build=dict(factory="lstm_h128_1l", tokens=64, batch=32),
        spec=dict(model=f"{M}:lstm_h128_1l", inputs=(f"tokens=B,64:int64<{VOCAB}",), batch=32),
    ),
    "gru-h128-2l-b64-t100-fp32": dict(
        build=dict(factory="gru_h128_2l", tokens=100, batch=64),
        spec=dict(model=f"{M}:gru_h128_2l", inputs=(f"tokens=B,100:int64<{VOCAB}",), batch=64),
    ),
    "rnn-tanh-h384-2l-b32-t200-fp32": dict(
        build=dict(factory="rnn_tanh_h384_2l", tokens=200, batch=32),
        spec=dict(model=f"{M}:rnn_tanh_h384_2l", inputs=(f"tokens=B,200:int64<{VOCAB}",), batch=32),
    ),
    "gpt2-medium-bf16-b8-s1024": dict(
        build=dict(hf="gpt2-medium", dtype="fp32", batch=8, seq=1024),
        spec=dict(model="gpt2-medium", batch=8, seq_len=1024, precision="bf16"),
    ),
    "qwen2-0.5b-bf16-b4-s1024": dict(
        build=dict(hf="qwen2-0.5b", dtype="fp32", batch=4, seq=1024),
        spec=dict(model="qwen2-0.5b", batch=4, seq_len=1024, precision="bf16"),
    ),
}


SETS = {
    "heldout": "cases",
    "blind": "blind_cases",
    "blind2": "blind2_cases",
    "blind3": "blind3_cases",
    "blind4": "blind4_cases",
    "blind5": "blind5_cases",
    "blind6": "blind6_cases",
    "blind7": "blind7_cases",
    "blind8": "blind8_cases",
    "blind9": "blind9_cases",
    "blind10": "blind10_cases",
    "blind11": "blind11_cases",
    "blind12": "blind12_cases",
    "blind13": "blind13_cases",
    "blind14": "blind14_cases",
    "blind15": "blind15_cases",
}
"""Each set of cases and the module under benchmarks/steptime that holds its `CASES`."""


def case_set(name: str) -> dict[str, dict[str, Any]]:
    """The cases of a set of `SETS` (`heldout`: this module's)."""
    return importlib.import_module(f"benchmarks.steptime.{SETS[name]}").CASES
