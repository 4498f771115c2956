"""The sixth blind step-time set: chosen after a study of the run-to-run noise
(`protocol_study.py`) and of the fp32 cuDNN recurrent calls between the persistent and the
stepped kernel's sizes; host-bound kinds (small and deep MLPs on Adam, SGD-momentum's for-loop
and AdamW's fused paths, fp32 GRU/LSTM, a ResNet with plain SGD, LoRA on a bf16 base, DPO,
GPT-2 on the for-loop path) and two device-bound controls, different in model or setting from
every earlier table. Their predictions, by the shipped rules (`results/blind6_previous_rules.json`)
and by a candidate rule (`results/blind6_predictions.json`), were committed before their first
run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf, _rnn
from benchmarks.steptime.blind5_cases import _on
from benchmarks.steptime.blind_cases import _plain

_SHORT = {"sgd": "sgd", "sgd-momentum": "sgdm", "adam": "adam", "adamw": "adamw"}


def _mlp(
    factory: str, width: int, batch: int, optim: str, path: str | None = None, bf16: bool = False
) -> dict[str, Any]:
    build: dict[str, Any] = dict(
        factory=factory, x=(width,), classes=10, batch=batch, optim=_SHORT[optim]
    )
    spec = _plain(factory, f"x=B,{width}", batch, optimizer=optim)
    if bf16:
        build["amp"], spec["precision"] = True, "bf16"
    return _on(dict(build=build, spec=spec), path)


def _resnet(px: int, batch: int, optim: str, bf16: bool = False) -> dict[str, Any]:
    build: dict[str, Any] = dict(
        factory="resnet18", x=(3, px, px), classes=1000, batch=batch, optim=_SHORT[optim]
    )
    spec = _plain("resnet18", f"x=B,3,{px},{px}", batch, optimizer=optim)
    if bf16:
        build["amp"], spec["precision"] = True, "bf16"
    return dict(build=build, spec=spec)


CASES: dict[str, dict[str, Any]] = {
    "mlp-5x320-b8-adam-fp32": _mlp("mlp_5x320", 40, 8, "adam"),
    "mlp-14x96-b8-sgdm-forloop-fp32": _mlp("mlp_14x96", 16, 8, "sgd-momentum", "for-loop"),
    "mlp-8x160-b24-adamw-fused-bf16": _mlp("mlp_8x160", 48, 24, "adamw", "fused", bf16=True),
    "gru-h224-2l-b16-t48-fp32": _rnn("gru_h224_2l", 48, 16),
    "lstm-h160-2l-b24-t40-fp32": _rnn("lstm_h160_2l", 40, 24),
    "gru-h96-3l-b32-t32-fp32": _rnn("gru_h96_3l", 32, 32),
    "gru-h160-bi-1l-b16-t64-fp32": _rnn("gru_h160_bi_1l", 64, 16),
    "resnet18-sgd-fp32-b8-32px": _resnet(32, 8, "sgd"),
    "lora-r32-gpt2-bf16base-b1-s256": _hf("gpt2", 1, 256, "bf16", lora=32),
    "dpo-gpt2-bf16ref-b1-s128": _hf("gpt2", 1, 128, dpo="bf16"),
    "gpt2-b4-s32-adamw-forloop-bf16": _on(_hf("gpt2", 4, 32), "for-loop"),
    # device-bound controls
    "qwen2-0.5b-bf16-b8-s512": _hf("qwen2-0.5b", 8, 512),
    "resnet18-adamw-bf16-b96-128px": _resnet(128, 96, "adamw", bf16=True),
}
