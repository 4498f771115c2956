"""The blind step-time cases: chosen after the host floor was refitted on the loop-timed
calibration rows (`hostfit.py`), different in model or setting from every earlier table; their
predictions (`results/blind_predictions.json`) were committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.cases import VOCAB

M = "benchmarks.steptime.models"


def _plain(factory: str, inputs: str, batch: int, **spec: Any) -> dict[str, Any]:
    return dict(model=f"{M}:{factory}", inputs=(inputs,), batch=batch, **spec)


CASES: dict[str, dict[str, Any]] = {
    "lora-r32-tinyllama-bf16base-b1-s256": dict(
        build=dict(hf="tinyllama-1.1b", dtype="bf16", lora=32, batch=1, seq=256),
        spec=dict(
            model="tinyllama-1.1b",
            batch=1,
            seq_len=256,
            precision="bf16",
            lora=dict(rank=32),
            weights_dtype="auto",
        ),
    ),
    "dpo-gpt2-medium-bf16ref-b1-s128": dict(
        build=dict(hf="gpt2-medium", dtype="fp32", dpo="bf16", batch=1, seq=128),
        spec=dict(
            model="gpt2-medium",
            batch=1,
            seq_len=128,
            precision="bf16",
            preference="dpo",
            reference_dtype="bf16",
        ),
    ),
    "gpt2-large-bf16-b4-s512": dict(
        build=dict(hf="gpt2-large", dtype="fp32", batch=4, seq=512),
        spec=dict(model="gpt2-large", batch=4, seq_len=512, precision="bf16"),
    ),
    "lora-r8-llama-3.2-1b-bf16base-b8-s512": dict(
        build=dict(hf="llama-3.2-1b", dtype="bf16", lora=8, batch=8, seq=512),
        spec=dict(
            model="llama-3.2-1b",
            batch=8,
            seq_len=512,
            precision="bf16",
            lora=dict(rank=8),
            weights_dtype="auto",
        ),
    ),
    "mlp-3x2048-b256-adamw-bf16": dict(
        build=dict(factory="mlp_3x2048", x=(512,), classes=100, batch=256, amp=True),
        spec=_plain("mlp_3x2048", "x=B,512", 256, precision="bf16"),
    ),
    "mlp-12x128-b16-sgdm-fp32": dict(
        build=dict(factory="mlp_12x128", x=(32,), classes=10, batch=16, optim="sgdm"),
        spec=_plain("mlp_12x128", "x=B,32", 16, optimizer="sgd-momentum"),
    ),
    "lstm-h192-2l-b32-t128-fp32": dict(
        build=dict(factory="lstm_h192_2l", tokens=128, batch=32),
        spec=_plain("lstm_h192_2l", f"tokens=B,128:int64<{VOCAB}", 32),
    ),
    "gru-h256-1l-b32-t96-fp32": dict(
        build=dict(factory="gru_h256_1l", tokens=96, batch=32),
        spec=_plain("gru_h256_1l", f"tokens=B,96:int64<{VOCAB}", 32),
    ),
    "rnn-relu-h128-bi-2l-b64-t80-fp32": dict(
        build=dict(factory="rnn_relu_h128_bi_2l", tokens=80, batch=64),
        spec=_plain("rnn_relu_h128_bi_2l", f"tokens=B,80:int64<{VOCAB}", 64),
    ),
    "small-cnn-sgdm-fp32-b128-32px": dict(
        build=dict(factory="small_cnn", x=(3, 32, 32), classes=10, batch=128, optim="sgdm"),
        spec=_plain("small_cnn", "x=B,3,32,32", 128, optimizer="sgd-momentum"),
    ),
    "resnet18-adamw-bf16-b64-160px": dict(
        build=dict(factory="resnet18", x=(3, 160, 160), classes=1000, batch=64, amp=True),
        spec=_plain("resnet18", "x=B,3,160,160", 64, precision="bf16"),
    ),
    "encoder-d256-4l-b64-s128-bf16": dict(
        build=dict(factory="encoder_d256_4l", x=(128, 256), classes=20, batch=64, amp=True),
        spec=_plain("encoder_d256_4l", "x=B,128,256", 64, precision="bf16"),
    ),
}
