"""The fourth blind step-time set: chosen after the host floor was refitted with a cost per
cast between floating dtypes and on `diagnose2.py`'s per-op rows, weighted to the host-bound
kinds the earlier sets missed (LoRA on a bf16 base, DPO, small and deep MLPs, a small CNN with
SGD, multi-layer GRU/LSTM, a Hugging Face classification head, gradient accumulation), with
two device-bound controls, different in model or setting from every earlier table; their
predictions (`results/blind4_predictions.json`) were committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind_cases import _plain
from benchmarks.steptime.cases import VOCAB


def _hf(model: str, batch: int, seq: int, dtype: str = "fp32", **extra: Any) -> dict[str, Any]:
    """An HF case: `extra` holds `lora` (rank), `dpo` (the reference's dtype), `accum` or
    `task`, read by both the harness and the spec."""
    build: dict[str, Any] = dict(hf=model, dtype=dtype, batch=batch, seq=seq)
    spec: dict[str, Any] = dict(model=model, batch=batch, seq_len=seq, precision="bf16")
    if "lora" in extra:
        build["lora"] = extra["lora"]
        spec.update(lora=dict(rank=extra["lora"]), weights_dtype=dtype)
    if "dpo" in extra:
        build["dpo"] = extra["dpo"]
        spec.update(preference="dpo", reference_dtype=extra["dpo"])
    if "accum" in extra:
        build["accum"] = spec["grad_accum"] = extra["accum"]
    if extra.get("task") == "seqcls":
        build["task"] = "seqcls"
        spec["task"] = "sequence-classification"
    return dict(build=build, spec=spec)


def _mlp(factory: str, width: int, batch: int, optim: str, bf16: bool = False, accum: int = 1):
    build: dict[str, Any] = dict(factory=factory, x=(width,), classes=10, batch=batch)
    spec = _plain(factory, f"x=B,{width}", batch)
    short = {"sgd": "sgd", "sgd-momentum": "sgdm", "adamw": "adamw"}[optim]
    if optim != "adamw":
        build["optim"], spec["optimizer"] = short, optim
    if bf16:
        build["amp"], spec["precision"] = True, "bf16"
    if accum > 1:
        build["accum"] = spec["grad_accum"] = accum
    return dict(build=build, spec=spec)


def _rnn(factory: str, tokens: int, batch: int, bf16: bool = False) -> dict[str, Any]:
    build: dict[str, Any] = dict(factory=factory, tokens=tokens, batch=batch)
    spec = _plain(factory, f"tokens=B,{tokens}:int64<{VOCAB}", batch)
    if bf16:
        build["amp"], spec["precision"] = True, "bf16"
    return dict(build=build, spec=spec)


CASES: dict[str, dict[str, Any]] = {
    "lora-r8-gpt2-bf16base-b4-s128": _hf("gpt2", 4, 128, "bf16", lora=8),
    "lora-r16-llama-3.2-1b-bf16base-b1-s128": _hf("llama-3.2-1b", 1, 128, "bf16", lora=16),
    "dpo-qwen2-0.5b-bf16ref-b1-s128": _hf("qwen2-0.5b", 1, 128, dpo="bf16"),
    "dpo-gpt2-bf16ref-b2-s64": _hf("gpt2", 2, 64, dpo="bf16"),
    "mlp-3x96-b4-sgd-fp32": _mlp("mlp_3x96", 24, 4, "sgd"),
    "mlp-20x128-b16-adamw-fp32": _mlp("mlp_20x128", 32, 16, "adamw"),
    "mlp-6x256-b32-sgdm-bf16": _mlp("mlp_6x256", 64, 32, "sgd-momentum", bf16=True),
    "mlp-4x256-b16-accum8-adamw-fp32": _mlp("mlp_4x256", 64, 16, "adamw", accum=8),
    "bn-cnn-sgd-fp32-b16-32px": dict(
        build=dict(factory="bn_cnn", x=(3, 32, 32), classes=10, batch=16, optim="sgd"),
        spec=_plain("bn_cnn", "x=B,3,32,32", 16, optimizer="sgd"),
    ),
    "gru-h256-2l-b16-t40-fp32": _rnn("gru_h256_2l", 40, 16),
    "lstm-h192-3l-b32-t48-bf16": _rnn("lstm_h192_3l", 48, 32, bf16=True),
    "bert-seqcls-b4-s64-bf16": _hf("bert-base-uncased", 4, 64, task="seqcls"),
    "gpt2-accum4-b2-s128-bf16": _hf("gpt2", 2, 128, accum=4),
    # device-bound controls
    "llama-3.2-1b-bf16-b4-s1024": _hf("llama-3.2-1b", 4, 1024),
    "gpt2-medium-bf16-b8-s768": _hf("gpt2-medium", 8, 768),
}
