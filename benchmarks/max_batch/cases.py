"""Model/setting pairs whose largest micro-batch on an H100 is predicted and then found for real.

Each case is a TrainSpec's keyword arguments without `batch` (and without `device`: the
prediction targets the catalog's "h100", the search runs on whatever card the GPU machine has
and records it). Sequence lengths were chosen so that the predicted maximum sits between about
4 and 400: a search on the GPU costs one fresh process per tried batch.
"""

from __future__ import annotations

from typing import Any

ZOO = "trainfit.models.zoo"
USER = "benchmarks.accuracy.user_steps"

DEVICE = "h100"
"""The catalog row the predictions target."""

CASES: dict[str, dict[str, Any]] = {
    "gpt2-bf16-s1024": dict(model="gpt2", seq_len=1024, precision="bf16"),
    "gpt2-medium-ckpt-bf16-s1024": dict(
        model="gpt2-medium", seq_len=1024, precision="bf16", checkpointing=True
    ),
    "bert-base-bf16-s512": dict(model="bert-base-uncased", seq_len=512, precision="bf16"),
    "t5-small-bf16-s512": dict(model="t5-small", seq_len=512, precision="bf16"),
    "qwen2-0.5b-bf16-s1024": dict(model="qwen2-0.5b", seq_len=1024, precision="bf16"),
    "tinyllama-ckpt-bf16-s2048": dict(
        model="tinyllama-1.1b", seq_len=2048, precision="bf16", checkpointing=True
    ),
    "llama-3.2-1b-pure-bf16-s2048": dict(model="llama-3.2-1b", seq_len=2048, precision="pure-bf16"),
    # NB: zoo models take their sequence length from `inputs` (seq_len is not applied to them).
    "tiny-gpt-user-bf16-s1024": dict(
        model=f"{USER}:tiny_gpt", inputs=("ids=B,1024:int64<1000",), precision="bf16"
    ),
    "melody-transformer-fp16-s1024": dict(
        model=f"{ZOO}:melody_transformer", inputs=("tokens=B,1024:int64<388",), precision="fp16"
    ),
    "vit-base-fp32": dict(model="vit-base-patch16-224", precision="fp32"),
    "resnet50-bf16": dict(model="resnet-50", precision="bf16"),
    # Added 2026-11-26, predicted (results/predicted_longseq.json) before their first GPU run:
    # long sequences and large vocabularies, where the earlier cases saw no miss.
    "llama-3.2-1b-ckpt-bf16-s4096": dict(
        model="llama-3.2-1b", seq_len=4096, precision="bf16", checkpointing=True
    ),
    "llama-3.2-1b-ckpt-bf16-s8192": dict(
        model="llama-3.2-1b", seq_len=8192, precision="bf16", checkpointing=True
    ),
    "qwen2-0.5b-ckpt-bf16-s4096": dict(
        model="qwen2-0.5b", seq_len=4096, precision="bf16", checkpointing=True
    ),
    "qwen2-1.5b-bf16-s2048": dict(model="qwen2-1.5b", seq_len=2048, precision="bf16"),
}
"""In the order the GPU search runs them: the language models with small maxima first, so that
a run cut short still has the cases where the prediction must be exact."""
