"""Training steps whose sharded (FSDP2) and CPU-offloaded memory is measured on GPUs and
compared with what `trainfit plan` says would hold them (`trainfit.plan.core.beyond_one_gpu`).

Each case is a TrainSpec's fields; every case runs bf16 with gradient checkpointing, as the
plan's verdict does for a job that one GPU cannot hold.
"""

from __future__ import annotations

CASES: dict[str, dict[str, object]] = {
    "gpt2-medium-s1024-b4": dict(model="gpt2-medium", seq_len=1024, batch=4),
    "qwen2-0.5b-s1024-b2": dict(model="qwen2-0.5b", seq_len=1024, batch=2),
    "tinyllama-1.1b-s1024-b2": dict(model="tinyllama-1.1b", seq_len=1024, batch=2),
    "llama-3.2-1b-s2048-b1": dict(model="llama-3.2-1b", seq_len=2048, batch=1),
}
COMMON: dict[str, object] = dict(precision="bf16", checkpointing=True, device="h200")
GPUS = (2,)
"""GPU counts measured sharded (0, one GPU with the states in CPU memory, is measured too)."""


def spec_fields(name: str) -> dict[str, object]:
    return {**CASES[name], **COMMON}
