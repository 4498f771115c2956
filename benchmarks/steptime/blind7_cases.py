"""The seventh blind step-time set: chosen after the fp32 cuDNN recurrent calls' kernel study
(`rnn_kernels.py`) moved where a pass leaves cuDNN's persistent kernel (backward over hidden 128
for an LSTM or GRU and over 256 for an RNN_TANH, an LSTM's or GRU's forward over hidden 192):
fp32 LSTM, GRU and RNN_TANH on either side of those bounds, one bidirectional, one bf16, and
the other host-bound kinds of the issue (a small MLP on AdamW, a ResNet on SGD-momentum, LoRA
on a bf16 base, DPO) with one device-bound control, each different in model or setting from
every earlier table. Their predictions, by the rules before the study
(`results/blind7_previous_rules.json`) and after it (`results/blind7_predictions.json`), were
committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf, _rnn
from benchmarks.steptime.blind6_cases import _mlp, _resnet

CASES: dict[str, dict[str, Any]] = {
    "lstm-h176-1l-b32-t48-fp32": _rnn("lstm_h176_1l", 48, 32),
    "lstm-h240-2l-b16-t32-fp32": _rnn("lstm_h240_2l", 32, 16),
    "gru-h144-2l-b48-t40-fp32": _rnn("gru_h144_2l", 40, 48),
    "rnn-tanh-h320-2l-b16-t64-fp32": _rnn("rnn_tanh_h320_2l", 64, 16),
    "lstm-h112-3l-b32-t48-fp32": _rnn("lstm_h112_3l", 48, 32),
    "gru-h208-1l-b24-t56-fp32": _rnn("gru_h208_1l", 56, 24),
    "lstm-h144-bi-1l-b16-t40-fp32": _rnn("lstm_h144_bi_1l", 40, 16),
    "gru-h320-2l-b32-t40-bf16": _rnn("gru_h320_2l", 40, 32, bf16=True),
    "mlp-7x224-b16-adamw-fp32": _mlp("mlp_7x224", 56, 16, "adamw"),
    "resnet18-sgdm-fp32-b16-64px": _resnet(64, 16, "sgd-momentum"),
    "lora-r16-gpt2-medium-bf16base-b2-s128": _hf("gpt2-medium", 2, 128, "bf16", lora=16),
    "dpo-gpt2-medium-bf16ref-b1-s96": _hf("gpt2-medium", 1, 96, dpo="bf16"),
    # device-bound control
    "qwen2-0.5b-bf16-b4-s1024": _hf("qwen2-0.5b", 4, 1024),
}
