"""How each figure of an estimate was obtained, in words: its typed label
(`trainfit.estimator.labels`) and the stored weights' scheme, for the reports and the JSON."""

from __future__ import annotations

from trainfit.estimator.labels import (
    BandwidthLabel,
    FigureLabel,
    How,
    Label,
    LoraLabel,
    PrefillLabel,
    WeightsLabel,
)
from trainfit.estimator.storage import INT4_GROUP, InferencePrecision
from trainfit.report.model import lora_text

_HOW_WORDS = {
    How.TRACED: "traced",
    How.MPS_TRACED: "traced (MPS rules: autocast lists, math attention)",
    How.MPS_HEAP_REPLAY: "modelled (MPS heap allocator replay, not checked on a Mac)",
    How.METAL_FLOOR: (
        "a floor: the least Metal held beside PyTorch's heaps in public out-of-memory "
        "messages; MPSGraph's own buffers above it are not modelled"
    ),
    How.CACHING_REPLAY: "simulated (caching allocator replay)",
    How.LIBRARY_DEFAULT: "PyTorch default size",
    How.MEASURED_CONSTANT: "measured constant",
    How.PER_SM_RULE: "modelled (per-SM rule fitted on public out-of-memory messages)",
    How.H100_CONSTANTS: "modelled (H100 constants)",
    How.H100: "modelled (H100)",
    How.RSS_INCREASE: "peak RSS increase over the RSS before the model is built",
    How.GLIBC_REPLAY: "simulated (glibc malloc replay: resident pages of the tensors)",
    How.GLIBC_ELSEWHERE: "modelled (glibc malloc replay; this host's allocator is not glibc)",
    How.CPU_CONTEXT: "measured constant (2-core x86-64 Linux, torch 2.13)",
    How.HEAP_ROUNDING: "simulated heap rounding plus a measured fragmentation fraction",
    How.QLORA: (
        "modelled (4-bit NF4 base with double quantisation and paged 8-bit AdamW, without "
        "bitsandbytes)"
    ),
    How.KV_CACHE: "traced (DynamicCache), growth replayed",
    How.PREFILL_LAST_LOGITS: "traced (no_grad prefill, use_cache=True, logits_to_keep=1)",
    How.PREFILL_ALL_LOGITS: ("traced (no_grad prefill, use_cache=True, logits for every position)"),
    How.DECODE: (
        "modelled: max(host issue time, device time of the traced decode step, adjusted for "
        "the average cache and the stored weight bytes)"
    ),
    How.FORWARD_MEMORY: (
        "traced (no_grad forward), simulated (caching allocator) + runtime context"
    ),
    How.MPS_FORWARD_MEMORY: "traced (no_grad forward), simulated (MPS heap allocator)",
    How.FORWARD_LATENCY: (
        "modelled: forward only on the step-time model (per-op roofline + host issue time)"
    ),
}


def scheme_text(precision: InferencePrecision) -> str:
    """How the weights are stored for inference, in words."""
    return {
        InferencePrecision.FP32: "fp32 weights (a plain module's forward only)",
        InferencePrecision.FP16: "fp16 weights",
        InferencePrecision.BF16: "bf16 weights",
        InferencePrecision.INT8: "modelled: LLM.int8()-like, int8 Linear weights + fp32 "
        "row scales; embeddings, norms and head 16-bit",
        InferencePrecision.INT4: f"modelled: GPTQ/AWQ-like int4 Linear weights, groups of "
        f"{INT4_GROUP} with 16-bit scale and zero; embeddings, norms and head 16-bit",
    }[precision]


def label_text(label: Label) -> str:
    """How one figure was obtained, in words."""
    if isinstance(label, FigureLabel):
        return _HOW_WORDS[label.how]
    if isinstance(label, LoraLabel):
        return f"traced (peft's own modules: {lora_text(label.lora)})"
    if isinstance(label, WeightsLabel):
        sixteen = label.precision in (InferencePrecision.FP16, InferencePrecision.BF16)
        return "exact (16-bit)" if sixteen else scheme_text(label.precision)
    if isinstance(label, PrefillLabel):
        where = (
            "calibrated on this GPU model"
            if label.calibrated_here
            else f"efficiencies of an {label.calibration_device}"
        )
        return f"modelled (per-op roofline, {where})"
    return _bandwidth(label)


def _bandwidth(label: BandwidthLabel) -> str:
    return (
        f"{label.efficiency:.3f} x datasheet bandwidth (timing/calibration.json, "
        f"{label.calibration_device}, {label.calibration_date})"
    )


def labels_text(labels: dict[str, Label]) -> dict[str, str]:
    """Each figure's label in words, by figure."""
    return {name: label_text(label) for name, label in labels.items()}
