"""The second blind step-time set: chosen after the host floor was refitted on the diagnostic
rows (`diagnose.py`) and cuDNN's recurrent call was made to wait for the device, different in
model or setting from every earlier table; their predictions
(`results/blind2_predictions.json`) were committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind_cases import _plain
from benchmarks.steptime.cases import VOCAB

CASES: dict[str, dict[str, Any]] = {
    "mlp-6x512-b64-adam-fp32": dict(
        build=dict(factory="mlp_6x512", x=(128,), classes=10, batch=64, optim="adam"),
        spec=_plain("mlp_6x512", "x=B,128", 64, optimizer="adam"),
    ),
    "mlp-16x64-b8-sgd-fp32": dict(
        build=dict(factory="mlp_16x64", x=(16,), classes=4, batch=8, optim="sgd"),
        spec=_plain("mlp_16x64", "x=B,16", 8, optimizer="sgd"),
    ),
    "mlp-2x1024-b128-sgdm-bf16": dict(
        build=dict(factory="mlp_2x1024", x=(256,), classes=50, batch=128, optim="sgdm", amp=True),
        spec=_plain("mlp_2x1024", "x=B,256", 128, optimizer="sgd-momentum", precision="bf16"),
    ),
    "mlp-10x192-b24-adamw-fp32": dict(
        build=dict(factory="mlp_10x192", x=(48,), classes=10, batch=24),
        spec=_plain("mlp_10x192", "x=B,48", 24),
    ),
    "gru-h192-2l-b32-t64-fp32": dict(
        build=dict(factory="gru_h192_2l", tokens=64, batch=32),
        spec=_plain("gru_h192_2l", f"tokens=B,64:int64<{VOCAB}", 32),
    ),
    "lstm-h320-1l-b16-t200-fp32": dict(
        build=dict(factory="lstm_h320_1l", tokens=200, batch=16),
        spec=_plain("lstm_h320_1l", f"tokens=B,200:int64<{VOCAB}", 16),
    ),
    "rnn-tanh-h128-1l-b32-t256-fp32": dict(
        build=dict(factory="rnn_tanh_h128_1l", tokens=256, batch=32),
        spec=_plain("rnn_tanh_h128_1l", f"tokens=B,256:int64<{VOCAB}", 32),
    ),
    "gru-h512-1l-b32-t64-bf16": dict(
        build=dict(factory="gru_h512_1l", tokens=64, batch=32, amp=True),
        spec=_plain("gru_h512_1l", f"tokens=B,64:int64<{VOCAB}", 32, precision="bf16"),
    ),
    "lstm-h96-bi-1l-b64-t50-fp32": dict(
        build=dict(factory="lstm_h96_bi_1l", tokens=50, batch=64, optim="sgdm"),
        spec=_plain("lstm_h96_bi_1l", f"tokens=B,50:int64<{VOCAB}", 64, optimizer="sgd-momentum"),
    ),
    "tiny-cnn-adamw-fp32-b32-28px": dict(
        build=dict(factory="tiny_cnn", x=(1, 28, 28), classes=10, batch=32),
        spec=_plain("tiny_cnn", "x=B,1,28,28", 32),
    ),
    "resnet18-adamw-fp32-b16-128px": dict(
        build=dict(factory="resnet18", x=(3, 128, 128), classes=1000, batch=16),
        spec=_plain("resnet18", "x=B,3,128,128", 16),
    ),
    "encoder-d512-6l-b16-s64-fp32": dict(
        build=dict(factory="encoder_d512_6l", x=(64, 512), classes=5, batch=16),
        spec=_plain("encoder_d512_6l", "x=B,64,512", 16),
    ),
    "lora-r4-gpt2-medium-bf16base-b2-s256": dict(
        build=dict(hf="gpt2-medium", dtype="bf16", lora=4, batch=2, seq=256),
        spec=dict(
            model="gpt2-medium",
            batch=2,
            seq_len=256,
            precision="bf16",
            lora=dict(rank=4),
            weights_dtype="bf16",
        ),
    ),
    "dpo-gpt2-bf16ref-b4-s128": dict(
        build=dict(hf="gpt2", dtype="fp32", dpo="bf16", batch=4, seq=128),
        spec=dict(
            model="gpt2",
            batch=4,
            seq_len=128,
            precision="bf16",
            preference="dpo",
            reference_dtype="bf16",
        ),
    ),
}
