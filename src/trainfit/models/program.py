"""What one training step of a model needs: the module, a batch factory and the loss.

`models.source.build_program()` makes a StepProgram from a spec; `models.preference` turns a
causal LM's into a DPO step; `trainfit.training` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from trainfit.models.heads import HfTask, ModelClass
from trainfit.spec import LoraSpec

Batch = dict[str, torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


@dataclass(frozen=True, kw_only=True, slots=True)
class Adapters:
    """The LoRA adapters a model is wrapped with."""

    lora: LoraSpec
    default_targets: str = ""
    """peft's default target modules for the model, comma-separated, when the spec names none
    and they are a list of at most 8 ("" otherwise)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskNote:
    """What a transformers model is trained for: its task, and a classification head's labels
    and transformers' problem type."""

    task: HfTask
    labels: int = 0
    """The head's labels (sequence and token classification; 0 for the other tasks)."""
    problem: str = ""
    """transformers' `problem_type` of a sequence-classification head ("regression",
    "single_label_classification", "multi_label_classification"; "" for the other tasks)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Description:
    """Where a model came from and what it is trained for."""

    source: str
    """The model's name and origin ("gpt2 (catalog)", a config path, an import path)."""
    model: str
    """A transformers model's `model_type`, else the module's class name."""
    task: TaskNote | None = None
    """A transformers model's task (None for a plain module)."""
    lora: Adapters | None = None
    """The LoRA adapters (None without LoRA)."""
    preference: DpoLoss | None = None
    """The preference loss the model is trained with (None: none)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OwnLoss:
    """The loss a transformers model computes itself for its task."""

    task: TaskNote


@dataclass(frozen=True, kw_only=True, slots=True)
class UserLoss:
    """A user's loss function, called as loss(output, batch)."""

    path: str
    """Its import path."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UserStep:
    """A user's step function, which computes the loss itself."""

    path: str
    """Its import path."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DefaultLoss:
    """trainfit's loss for a plain module: cross-entropy for (N, C) outputs, else the mean of
    the output."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DpoLoss:
    """The DPO sigmoid loss on per-sequence log-prob sums, chosen and rejected in one forward
    of 2 x batch sequences."""

    beta: float
    precomputed: bool
    """The reference's log-probs come in the batch (else a frozen copy computes them)."""


LossNote = OwnLoss | UserLoss | UserStep | DefaultLoss | DpoLoss
"""How the loss is computed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepProgram:
    """A model with its batch and loss: everything one training step needs."""

    model: nn.Module
    """The module, built on the requested device."""
    make_batch: Callable[[torch.device, bool], Batch]
    """(device, real) -> batch; `real` fills values (ids in range), else leaves them empty."""
    compute_loss: LossFn
    """(model, batch) -> scalar loss; owns the forward pass."""
    description: Description
    """Where the model came from and its task, for the result."""
    loss_note: LossNote
    """How the loss is computed, said in the result."""
    is_hf: bool
    """A transformers model (supports gradient_checkpointing_enable)."""
    tokens_per_sample: int | None = None
    """Tokens one sample carries (the sequence length of a language model's input), if any."""
    task: str | None = None
    """A transformers model's task ("causal-lm", ...); None for a plain module."""
    model_class: ModelClass | None = None
    """The transformers class the model was built as, and why; None for a plain module."""


def hf_checkpointing_enable(model: nn.Module, kwargs: dict[str, object] | None = None) -> None:
    """Turn on a transformers model's own checkpointing, with `kwargs` for
    torch.utils.checkpoint: `activation_checkpointing_enable`, its name since transformers
    5.2x, else `gradient_checkpointing_enable` (the old name warns where the new one exists)."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is None:
        enable = model.gradient_checkpointing_enable
    enable(kwargs)


def hf_checkpointing_disable(model: nn.Module) -> None:
    """Turn off a transformers model's own checkpointing (see `hf_checkpointing_enable`)."""
    disable = getattr(model, "activation_checkpointing_disable", None)
    if disable is None:
        disable = model.gradient_checkpointing_disable
    disable()


def hf_checkpointing(model: nn.Module) -> bool:
    """Whether a transformers model's own checkpointing is on (False for any other module),
    read without the deprecated property where the new one exists."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return getattr(model, name) is True
    return False
