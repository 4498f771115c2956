"""The third blind step-time set: multi-layer and bidirectional cuDNN recurrent models, chosen
after a multi-layer call was made to cost the stepped kernel per time step and layer
(`rnnfit.py`, on `diagnose2.py`'s rows), different in mode, depth, width, batch or length from
every earlier table; their predictions (`results/blind3_predictions.json`) were committed
before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind_cases import _plain
from benchmarks.steptime.cases import VOCAB


def _rnn(factory: str, tokens: int, batch: int, bf16: bool = False, **spec: Any) -> dict[str, Any]:
    build: dict[str, Any] = dict(factory=factory, tokens=tokens, batch=batch)
    if bf16:
        build["amp"] = True
        spec["precision"] = "bf16"
    if spec.get("optimizer") == "sgd-momentum":
        build["optim"] = "sgdm"
    return dict(
        build=build,
        spec=_plain(factory, f"tokens=B,{tokens}:int64<{VOCAB}", batch, **spec),
    )


CASES: dict[str, dict[str, Any]] = {
    "gru-h256-3l-b48-t80-fp32": _rnn("gru_h256_3l", 80, 48),
    "lstm-h384-2l-b24-t96-bf16": _rnn("lstm_h384_2l", 96, 24, bf16=True),
    "gru-h128-bi-2l-b64-t60-fp32": _rnn("gru_h128_bi_2l", 60, 64, optimizer="sgd-momentum"),
    "rnn-tanh-h256-3l-b32-t120-fp32": _rnn("rnn_tanh_h256_3l", 120, 32),
    "lstm-h128-4l-b16-t128-fp32": _rnn("lstm_h128_4l", 128, 16),
    "gru-h768-2l-b16-t48-bf16": _rnn("gru_h768_2l", 48, 16, bf16=True),
}
