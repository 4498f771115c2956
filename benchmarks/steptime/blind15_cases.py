"""The fifteenth blind step-time set: everyday training jobs, picked as people run them on one
GPU (as the eleventh and fourteenth sets were), chosen and predicted at the end of the session
that measured the fourteenth, for a later session to time: its predictions
(`results/blind15_predictions.json`, the rules before's `results/blind15_previous_rules.json`
the same) were committed before any run, so whichever rules ship by then are checked against
these as the rules before.

Causal LMs fine-tuned in full under bf16 autocast (GPT-2 at short sequences, GPT-2-medium at
1024 tokens, Llama-3.2-1B and Qwen2-1.5B), LoRA on bf16 bases (Llama-3.2-1B at rank 16,
Qwen2-0.5B at rank 32), DPO on GPT-2-medium with a bf16 reference, a BERT classifier at 256
tokens, ResNet-50 in bf16 at batch 128, ResNet-18 on CIFAR-sized images in fp32 with AdamW, the
melody transformer in fp32, a two-layer GRU in fp32 and a six-layer MLP under bf16 autocast.
Each differs in model or setting from every earlier table."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf, _mlp, _rnn
from benchmarks.steptime.blind8_cases import _zoo
from benchmarks.steptime.blind9_cases import _cnn

CASES: dict[str, dict[str, Any]] = {
    "gpt2-b32-s128": _hf("gpt2", 32, 128),
    "gpt2-medium-b2-s1024": _hf("gpt2-medium", 2, 1024),
    "llama-3.2-1b-b4-s512": _hf("llama-3.2-1b", 4, 512),
    "qwen2-1.5b-b2-s512": _hf("qwen2-1.5b", 2, 512),
    "lora-r16-llama-3.2-1b-bf16base-b8-s512": _hf("llama-3.2-1b", 8, 512, "bf16", lora=16),
    "lora-r32-qwen2-0.5b-bf16base-b16-s256": _hf("qwen2-0.5b", 16, 256, "bf16", lora=32),
    "dpo-gpt2-medium-bf16ref-b2-s512": _hf("gpt2-medium", 2, 512, dpo="bf16"),
    "bert-base-seqcls-b16-s256": _hf("bert-base-uncased", 16, 256, task="seqcls"),
    "resnet50-bf16-b128": _zoo("resnet50", 128, "bf16"),
    "resnet18-fp32-b128-32px": _cnn("resnet18", "B,3,32,32", 128, 10, "fp32"),
    "melody-b32-fp32": _zoo("melody_transformer", 32),
    "gru-h256-2l-b64-t128-fp32": _rnn("gru_h256_2l", 128, 64),
    "mlp-6x512-b512-bf16": _mlp("mlp_6x512", 128, 512, "adamw", bf16=True),
}
