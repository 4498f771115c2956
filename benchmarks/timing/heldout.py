"""Training steps chosen after the step-time model was finished, to check it on steps that
steered nothing: other models of the catalog, other sizes, precisions and accumulation.

Each case is a TrainSpec's keyword arguments (as benchmarks/accuracy/cases.py).
"""

from __future__ import annotations

from typing import Any

ZOO = "trainfit.models.zoo"

HELDOUT: dict[str, dict[str, Any]] = {
    "gpt2-large-bf16": dict(model="gpt2-large", batch=4, seq_len=1024, precision="bf16"),
    "bert-large-bf16": dict(model="bert-large-uncased", batch=16, seq_len=512, precision="bf16"),
    "qwen2-1.5b-ckpt-bf16": dict(
        model="qwen2-1.5b", batch=4, seq_len=2048, precision="bf16", checkpointing=True
    ),
    "llama-3.2-3b-pure-bf16": dict(
        model="llama-3.2-3b", batch=2, seq_len=1024, precision="pure-bf16"
    ),
    "vit-base-fp16-b256": dict(model="vit-base-patch16-224", batch=256, precision="fp16"),
    "resnet50-fp32-b128": dict(model="resnet-50", batch=128, precision="fp32"),
    "whisper-small-fp32": dict(model="whisper-small", batch=4, precision="fp32"),
    "t5-small-fp32-b32": dict(model="t5-small", batch=32, seq_len=256, precision="fp32"),
    "gpt2-fp32-accum4": dict(model="gpt2", batch=16, seq_len=256, precision="fp32", grad_accum=4),
    "tinyllama-bf16-clip": dict(
        model="tinyllama-1.1b", batch=8, seq_len=512, precision="bf16", grad_clip=1.0
    ),
    "melody-lstm-fp32-b128": dict(model=f"{ZOO}:melody_lstm", batch=128, precision="fp32"),
    "redimnet-bf16-b128": dict(model=f"{ZOO}:redimnet_like", batch=128, precision="bf16"),
    "mistral-7b-sgd-s256": dict(
        model="mistral-7b", batch=4, seq_len=256, precision="pure-bf16", optimizer="sgd"
    ),
    "llama-3.2-1b-ckpt-b16": dict(
        model="llama-3.2-1b", batch=16, seq_len=512, precision="bf16", checkpointing=True
    ),
}
