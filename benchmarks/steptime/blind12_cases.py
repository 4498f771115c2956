"""The twelfth blind step-time set: attention-heavy training steps, chosen to check the fused
attention curves (`calibration.json` `attention_curve` and `attention_parallel_curve`, with the
review's correction and the key-length bound) on jobs the eleventh set did not stress: causal
LMs at 1024-4096 tokens in bf16 (GPT-2 with attention dropout, GPT-2-large, Qwen2-0.5B, LoRA on
Llama-3.2-1B at 4096 and TinyLlama at 2048 tokens), a BERT classifier at 512 tokens (dropout
without causality: the curve's extrapolation), and the MIDI and melody decoders in fp32 (the
memory-efficient kernel) and bf16 at one to a few sequences a micro-batch (few problems). Each
differs in model or setting from every earlier table. Their predictions, by the rules before
the curves (`results/blind12_previous_rules.json`, 9f7f108) and with them
(`results/blind12_predictions.json`), were committed before their first run."""

from __future__ import annotations

from typing import Any

from benchmarks.steptime.blind4_cases import _hf
from benchmarks.steptime.blind8_cases import _zoo

CASES: dict[str, dict[str, Any]] = {
    "gpt2-b16-s1024": _hf("gpt2", 16, 1024),
    "gpt2-large-b4-s1024": _hf("gpt2-large", 4, 1024),
    "qwen2-0.5b-b4-s2048": _hf("qwen2-0.5b", 4, 2048),
    "lora-r8-llama-3.2-1b-bf16base-b2-s4096": _hf("llama-3.2-1b", 2, 4096, "bf16", lora=8),
    "lora-r16-tinyllama-bf16base-b4-s2048": _hf("tinyllama-1.1b", 4, 2048, "bf16", lora=16),
    "bert-base-seqcls-b16-s512": _hf("bert-base-uncased", 16, 512, task="seqcls"),
    "midi350m-b2-fp32": _zoo("midi_transformer_350m", 2),
    "midi100m-b4-bf16": _zoo("midi_transformer_100m", 4, "bf16"),
    "midi760m-b1-bf16": _zoo("midi_transformer_760m", 1, "bf16"),
    "melody-b64-fp32": _zoo("melody_transformer", 64),
}
