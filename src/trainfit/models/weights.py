"""The dtype each part of the model is loaded in, as the user's code loads it.

transformers' `from_pretrained` loads a checkpoint in its config's `torch_dtype`/`dtype` (bf16
for most current LLMs). trainfit builds the model in fp32 and then puts the frozen parts in the
dtype the user's code would hold them in:
- a full fine-tune keeps fp32 master weights (the assumption: the user's trainer upcasts or
  trains with fp32 master weights under mixed precision, as HF Trainer and accelerate do);
  pure-bf16 casts everything to bf16 later;
- a LoRA base is frozen and never upcast: `auto` takes the config's dtype; peft then makes the
  adapters in fp32 (`get_peft_model(..., autocast_adapter_dtype=True)`, its default);
- a DPO reference copy is frozen: by default in the policy's weights' dtype.
A plain module (a catalog factory or an import path) has no config: `auto` is fp32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.spec import TrainSpec

_NAMES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "half": torch.float16,
}


def config_dtype(config: Any | None) -> torch.dtype:
    """The dtype `from_pretrained` loads `config`'s checkpoint in: its `dtype` (transformers 5)
    or `torch_dtype`, fp32 where it declares none (or for a plain module, `config` None)."""
    if config is None:
        return torch.float32
    declared = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    return named_dtype(declared, "the model's config")


def named_dtype(declared: object, where: str) -> torch.dtype:
    """A config's dtype (a torch dtype, its name, "auto" or None: fp32), or SpecError."""
    if declared is None or declared == "auto":
        return torch.float32
    if isinstance(declared, torch.dtype):
        return declared
    name = str(declared).removeprefix("torch.")
    if name not in _NAMES:
        raise SpecError(
            [f"{where} declares dtype {declared!r}; trainfit knows {', '.join(_NAMES)}"]
        )
    return _NAMES[name]


def base_dtype(spec: TrainSpec, declared: torch.dtype) -> torch.dtype:
    """The dtype of the policy's weights as loaded: the frozen base under LoRA (auto: the
    config's), fp32 master weights on a full fine-tune (bf16 under pure-bf16)."""
    if spec.lora is None:
        return spec.precision.param_dtype
    chosen = spec.weights_dtype.dtype
    return declared if chosen is None else chosen


def reference_dtype(spec: TrainSpec, policy: torch.dtype, declared: torch.dtype) -> torch.dtype:
    """The DPO reference copy's dtype: as asked (auto: the config's), else the policy's."""
    if spec.reference_dtype is None:
        return policy
    chosen = spec.reference_dtype.dtype
    return declared if chosen is None else chosen


def check_device_dtype(spec: TrainSpec, dtype: torch.dtype) -> None:
    """Raise SpecError for bf16 weights on a CUDA device without bf16 (compute capability
    below 8.0, e.g. T4, V100). For the weights the dtype options choose (a LoRA base, a DPO
    reference copy); pure-bf16 on such a card is the precision's business."""
    if dtype is not torch.bfloat16:
        return
    device = get_device(spec.device)
    if device.kind is not DeviceKind.CUDA or device.has_bf16:
        return
    major, minor = device.compute_capability
    raise SpecError(
        [
            f"{device.display} (compute capability {major}.{minor}) has no bf16: its weights "
            "can be fp32 or fp16; give --weights-dtype fp16 or fp32 (and --reference-dtype)"
        ]
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class StepDtypes:
    """The dtypes a step holds its weights, gradients and optimizer state in."""

    weights: str
    """e.g. "fp32", or "bf16 frozen, fp32 trainable" under LoRA."""
    gradients: str
    """The trainable weights' dtype ("none" when nothing trains)."""
    optimizer_state: str
    """The optimizer state's dtype: the trainable weights' for torch's optimizers, int8 blocks
    for 8-bit AdamW, "none" for plain SGD."""

    @classmethod
    def of(cls, model: nn.Module, optimizer: str) -> StepDtypes:
        """The dtypes of `model`'s parameters, trained with `optimizer` (an OptimizerKind value)."""
        trainable = _names({p.dtype for p in model.parameters() if p.requires_grad})
        frozen = _names({p.dtype for p in model.parameters() if not p.requires_grad})
        if not frozen:
            weights = trainable or "none"
        elif not trainable:
            weights = f"{frozen} frozen"
        else:
            weights = f"{frozen} frozen, {trainable} trainable"
        if optimizer == "sgd" or not trainable:
            state = "none"
        elif optimizer == "adamw-8bit":
            state = "int8 (blockwise, fp32 scales)"
        else:
            state = trainable
        return cls(weights=weights, gradients=trainable or "none", optimizer_state=state)

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer_state": self.optimizer_state,
        }


def _names(dtypes: set[torch.dtype]) -> str:
    return "+".join(sorted(describe(d) for d in dtypes))


def describe(dtype: torch.dtype) -> str:
    """fp32, bf16 or fp16."""
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(
        dtype, str(dtype).removeprefix("torch.")
    )
