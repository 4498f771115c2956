"""The CPU accuracy suite: training steps measured on this CPU and estimated for `cpu`.

Each case is a TrainSpec's keyword arguments (device "cpu"), small enough that three real
steps take seconds on a 2-core machine. `FIT` cases set the one constant fitted on CPU data
(the runtime's first-use memory, `trainfit.memory.host.CPU_RUNTIME_BYTES`); the others are
held out.
"""

from __future__ import annotations

from typing import Any

ZOO = "trainfit.models.zoo"

CASES: dict[str, dict[str, Any]] = {
    "gpt2-fp32": dict(model="gpt2", batch=2, seq_len=128, precision="fp32"),
    # NB: bf16 matmuls run at ~1 GFLOP/s on a CPU without AVX512-BF16: bf16 cases are tiny
    "gpt2-bf16": dict(model="gpt2", batch=1, seq_len=16, precision="bf16"),
    "gpt2-ckpt-fp32": dict(
        model="gpt2", batch=2, seq_len=256, precision="fp32", checkpointing=True
    ),
    "gpt2-sgd-fp32": dict(model="gpt2", batch=2, seq_len=128, precision="fp32", optimizer="sgd"),
    "bert-base-fp32": dict(model="bert-base-uncased", batch=2, seq_len=128, precision="fp32"),
    "t5-small-fp32": dict(model="t5-small", batch=2, seq_len=128, precision="fp32"),
    "vit-base-fp32": dict(model="vit-base-patch16-224", batch=2, precision="fp32"),
    "vit-base-frozen-fp32": dict(
        model="vit-base-patch16-224", batch=2, precision="fp32", freeze=("vit.*",)
    ),
    "resnet50-fp32": dict(model="resnet-50", batch=4, precision="fp32"),
    "emotion-mlp-fp32": dict(model=f"{ZOO}:emotion_mlp", batch=256, precision="fp32"),
    "emotion-mlp-bf16": dict(model=f"{ZOO}:emotion_mlp", batch=256, precision="bf16"),
    "melody-transformer-bf16": dict(model=f"{ZOO}:melody_transformer", batch=2, precision="bf16"),
    "melody-lstm-fp32": dict(model=f"{ZOO}:melody_lstm", batch=8, precision="fp32"),
    "vq-ae-fp32": dict(model=f"{ZOO}:vq_patch_autoencoder", batch=2, multiplier=4),
    "redimnet-fp32-sgdm": dict(
        model=f"{ZOO}:redimnet_like", batch=8, precision="fp32", optimizer="sgd-momentum"
    ),
}

# Cases whose CPU data set the runtime constant; every other case is held out.
FIT = ("emotion-mlp-fp32", "gpt2-fp32")
