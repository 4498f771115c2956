"""What one training step of a model needs: the module, a batch factory and the loss.

`models.source.build_program()` makes a StepProgram from a spec; `models.preference` turns a
causal LM's into a DPO step; `trainfit.training` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from trainfit.models.heads import ModelClass

Batch = dict[str, torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


@dataclass(frozen=True, kw_only=True, slots=True)
class StepProgram:
    """A model with its batch and loss: everything one training step needs."""

    model: nn.Module
    """The module, built on the requested device."""
    make_batch: Callable[[torch.device, bool], Batch]
    """(device, real) -> batch; `real` fills values (ids in range), else leaves them empty."""
    compute_loss: LossFn
    """(model, batch) -> scalar loss; owns the forward pass."""
    description: str
    """Where the model came from and its task, for the result."""
    loss_note: str
    """How the loss is computed, said in the result."""
    is_hf: bool
    """A transformers model (supports gradient_checkpointing_enable)."""
    tokens_per_sample: int | None = None
    """Tokens one sample carries (the sequence length of a language model's input), if any."""
    task: str | None = None
    """A transformers model's task ("causal-lm", ...); None for a plain module."""
    model_class: ModelClass | None = None
    """The transformers class the model was built as, and why; None for a plain module."""
