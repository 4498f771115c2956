"""The fourteenth blind step-time set: everyday training jobs again, picked as people run them
on one GPU (as the eleventh set was), after the stalls and blocking studies (README) and with
the model unchanged since the thirteenth set.

Causal LMs fine-tuned in full under bf16 autocast (GPT-2, GPT-2-medium, GPT-2-large,
Qwen2-0.5B), LoRA on bf16 bases of Qwen2-1.5B and Llama-3.2-3B, DPO on Qwen2-0.5B with a bf16
reference, a BERT-large classifier, ResNet-50 in fp32, ResNet-18 on CIFAR-sized images in bf16,
a wide MLP and a two-layer LSTM in fp32. Each differs in model or setting from every earlier
table. The model did not change after the thirteenth set, so the predictions
(`results/blind14_predictions.json`) equal the rules before's
(`results/blind14_previous_rules.json`); both were committed before the first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf, _mlp, _rnn
from benchmarks.steptime.blind8_cases import _zoo
from benchmarks.steptime.blind9_cases import _cnn

CASES: dict[str, dict[str, Any]] = {
    "gpt2-b16-s256": _hf("gpt2", 16, 256),
    "gpt2-medium-b8-s512": _hf("gpt2-medium", 8, 512),
    "gpt2-large-b2-s512": _hf("gpt2-large", 2, 512),
    "qwen2-0.5b-b8-s256": _hf("qwen2-0.5b", 8, 256),
    "lora-r16-qwen2-1.5b-bf16base-b4-s1024": _hf("qwen2-1.5b", 4, 1024, "bf16", lora=16),
    "lora-r8-llama-3.2-3b-bf16base-b2-s1024": _hf("llama-3.2-3b", 2, 1024, "bf16", lora=8),
    "dpo-qwen2-0.5b-bf16ref-b2-s512": _hf("qwen2-0.5b", 2, 512, dpo="bf16"),
    "bert-large-seqcls-b32-s128": _hf("bert-large-uncased", 32, 128, task="seqcls"),
    "resnet50-fp32-b64": _zoo("resnet50", 64),
    "resnet18-bf16-b256-32px": _cnn("resnet18", "B,3,32,32", 256, 10, "bf16"),
    "mlp-3x2048-b512-adamw": _mlp("mlp_3x2048", 512, 512, "adamw"),
    "lstm-h192-2l-b64-t128-fp32": _rnn("lstm_h192_2l", 128, 64),
}
