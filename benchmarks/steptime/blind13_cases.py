"""The thirteenth blind step-time set: a mixed set of everyday steps, host-bound and
device-bound, chosen (and committed) before the host-floor refit on the eighth to eleventh sets
was run, to check whichever host floor ships: GPT-2 and BERT under bf16 autocast, LoRA on a
bf16 Qwen2-0.5B, DPO on GPT-2-medium, the melody and 100M MIDI decoders and the VQ autoencoder
in bf16, the emotion MLP in fp32, ResNet-18 on CIFAR-sized images with SGD and momentum,
ResNet-50 under fp16 autocast, a six-layer MLP with AdamW and a one-layer GRU in bf16. Each
differs in model or setting from every earlier table. The refit was not shipped (it traded
the older tables for the newer sets, and the twelfth set, not fitted on, got no better: README),
so its predictions (`results/blind13_predictions.json`) are the shipped model's, the same as
`results/blind13_previous_rules.json`; both were committed before the first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf, _mlp, _rnn
from benchmarks.steptime.blind8_cases import _zoo
from benchmarks.steptime.blind9_cases import _cnn

CASES: dict[str, dict[str, Any]] = {
    "gpt2-b4-s256": _hf("gpt2", 4, 256),
    "bert-base-seqcls-b64-s128": _hf("bert-base-uncased", 64, 128, task="seqcls"),
    "lora-r8-qwen2-0.5b-bf16base-b4-s512": _hf("qwen2-0.5b", 4, 512, "bf16", lora=8),
    "dpo-gpt2-medium-bf16ref-b1-s256": _hf("gpt2-medium", 1, 256, dpo="bf16"),
    "melody-b16-bf16": _zoo("melody_transformer", 16, "bf16"),
    "midi100m-b2-bf16": _zoo("midi_transformer_100m", 2, "bf16"),
    "vq-bf16-b16-x8": _zoo("vq_patch_autoencoder", 16, "bf16", multiplier=8),
    "emotion-b256-fp32": _zoo("emotion_mlp", 256),
    "resnet18-fp32-b64-32px-sgdm": _cnn("resnet18", "B,3,32,32", 64, 10, "fp32", "sgd-momentum"),
    "resnet50-fp16-b64": _zoo("resnet50", 64, "fp16"),
    "mlp-6x512-b128-adamw": _mlp("mlp_6x512", 128, 128, "adamw"),
    "gru-h256-1l-b64-t128-bf16": _rnn("gru_h256_1l", 128, 64, bf16=True),
}
