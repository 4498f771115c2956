"""The eleventh blind step-time set: everyday training jobs on one H100, chosen after the fused
attention curves (`calibration.json` `attention_curve` and `attention_parallel_curve`, read
off `attention_grid.py`'s profiled SDPA calls) were written.

Not picked at the model's weak spots, as the ninth and tenth sets were: a mix of what people
fine-tune and train from scratch on one GPU, each class the step-time issue names among it:
Hugging Face causal LMs (full fine-tunes under bf16 autocast, LoRA on a bf16 base at long
sequences, DPO with a bf16 reference), a BERT classifier, the melody transformer in bf16, two
ResNets (one with SGD and momentum), a small MLP with SGD and a two-layer LSTM. Each differs in
model or setting from every earlier table. Their predictions, by the rules before
(`results/blind11_previous_rules.json`) and after (`results/blind11_predictions.json`), were
committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf, _mlp, _rnn
from benchmarks.steptime.blind8_cases import _zoo
from benchmarks.steptime.blind9_cases import _cnn

CASES: dict[str, dict[str, Any]] = {
    "gpt2-b8-s512": _hf("gpt2", 8, 512),
    "gpt2-medium-b4-s1024": _hf("gpt2-medium", 4, 1024),
    "qwen2-0.5b-b4-s512": _hf("qwen2-0.5b", 4, 512),
    "lora-r16-llama-3.2-1b-bf16base-b4-s1024": _hf("llama-3.2-1b", 4, 1024, "bf16", lora=16),
    "lora-r8-tinyllama-bf16base-b2-s2048": _hf("tinyllama-1.1b", 2, 2048, "bf16", lora=8),
    "bert-base-seqcls-b32-s128": _hf("bert-base-uncased", 32, 128, task="seqcls"),
    "dpo-gpt2-bf16ref-b4-s256": _hf("gpt2", 4, 256, dpo="bf16"),
    "melody-b32-bf16": _zoo("melody_transformer", 32, "bf16"),
    "resnet50-bf16-b64": _zoo("resnet50", 64, "bf16"),
    "resnet18-fp32-b128-64px-sgdm": _cnn("resnet18", "B,3,64,64", 128, 100, "fp32", "sgd-momentum"),
    "mlp-4x512-b256-sgd": _mlp("mlp_4x512", 256, 256, "sgd"),
    "lstm-h384-2l-b32-t128-bf16": _rnn("lstm_h384_2l", 128, 32, bf16=True),
}
