"""How inference stores a model: the weights' precision and bytes, and the KV cache's size.

16-bit weights take 2 bytes per element. int8 and int4 replace each Linear's (or Conv1D's) 2-D
weight but the output head's, as bitsandbytes' LLM.int8() and GPTQ/AWQ do: int8 one byte per
weight plus an fp32 scale per output row; int4 half a byte per weight plus a 16-bit scale and
zero per group of `INT4_GROUP` input elements. Everything else stays 16-bit.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

import torch
from torch import nn

INT4_GROUP = 128
"""Input elements per int4 quantization group (GPTQ's and AWQ's usual group size)."""


class InferencePrecision(str, Enum):
    """How the weights are stored for inference."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    INT4 = "int4"

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype activations and the KV cache are in (int8/int4 compute in bf16)."""
        if self is InferencePrecision.FP32:
            return torch.float32
        return torch.float16 if self is InferencePrecision.FP16 else torch.bfloat16


def _quantized(module: nn.Module, name: str, tensor: torch.Tensor, head: bool) -> bool:
    """Whether a weight is one a quantizer replaces: a Linear's (or Conv1D's) 2-D weight,
    not the output head (bitsandbytes and GPTQ keep the head in 16 bit)."""
    if name != "weight" or tensor.dim() != 2 or head:
        return False
    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"


def tensor_bytes(
    module: nn.Module, name: str, tensor: torch.Tensor, precision: InferencePrecision, head: bool
) -> int:
    """Bytes one parameter or buffer takes at `precision` (see the module docstring)."""
    sixteen = tensor.numel() * 2 if tensor.is_floating_point() else tensor.nbytes
    if precision in (InferencePrecision.FP16, InferencePrecision.BF16):
        return sixteen
    if not _quantized(module, name, tensor, head):
        return sixteen
    # Linear: weight (out, in); Conv1D: weight (in, out)
    rows, inner = (
        tensor.shape if isinstance(module, nn.Linear) else (tensor.shape[1], tensor.shape[0])
    )
    if precision is InferencePrecision.INT8:
        return rows * inner + 4 * rows
    return math.ceil(rows * inner / 2) + 4 * rows * math.ceil(inner / INT4_GROUP)


def kv_cache_bytes(config: Any, tokens: int, batch: int, dtype_bytes: int = 2) -> int:
    """2 (K and V) x layers x kv_heads x head_dim x positions x batch x bytes, from a
    transformers config; a sliding-window layer holds at most its window less one position
    (transformers' DynamicSlidingWindowLayer)."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    layer_types = getattr(text, "layer_types", None)
    window = getattr(text, "sliding_window", None)
    if layer_types is None:
        kind = "sliding_attention" if window is not None else "full_attention"
        layer_types = [kind] * text.num_hidden_layers
    total = 0
    for kind in layer_types:
        held = min(tokens, window - 1) if kind == "sliding_attention" and window else tokens
        total += 2 * kv_heads * head_dim * held * batch * dtype_bytes
    return total


__all__ = ["INT4_GROUP", "InferencePrecision", "kv_cache_bytes", "tensor_bytes"]
