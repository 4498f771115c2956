"""The configs and the cast step of the held-out head, optimizer and cast cases.

Each head case's config is built in code (no hub download), names its class in `architectures`
as a fine-tuning checkpoint's config.json does, and is used twice: the GPU run builds the model
from it with transformers' auto class for the head, and trainfit's prediction reads it from a
directory it is saved to (`compare.py`). `cast_bf16_step` is a user's step function that puts
the model in bf16 before each forward (`nn.Module.to`), on GPT-2's tied embedding.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

# head config name -> (catalog row or transformers config class, architecture, overrides)
HEADS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "distilbert-seqcls3": (
        "DistilBertConfig",
        "DistilBertForSequenceClassification",
        {"num_labels": 3},
    ),
    "bert-tokcls9": ("bert-base-uncased", "BertForTokenClassification", {"num_labels": 9}),
    "roberta-qa": ("RobertaConfig", "RobertaForQuestionAnswering", {}),
    "bert-mc": ("bert-base-uncased", "BertForMultipleChoice", {}),
    "qwen2-seqcls": ("qwen2-0.5b", "Qwen2ForSequenceClassification", {"num_labels": 2}),
}

AUTO_FOR: dict[str, str] = {
    "SequenceClassification": "AutoModelForSequenceClassification",
    "TokenClassification": "AutoModelForTokenClassification",
    "QuestionAnswering": "AutoModelForQuestionAnswering",
    "MultipleChoice": "AutoModelForMultipleChoice",
}
"""The auto class a user's code builds each head with."""

CHOICES = 4
"""Choices per multiple-choice example (trainfit's MULTIPLE_CHOICES)."""


def head_config(name: str) -> Any:
    """The transformers config of head case `name`, its `architectures` set."""
    import transformers

    from trainfit.models.catalog import lookup

    base, architecture, overrides = HEADS[name]
    if base.endswith("Config"):
        config = getattr(transformers, base)(**overrides)
    else:
        values = dict(lookup(base).config)
        config = transformers.AutoConfig.for_model(values.pop("model_type"), **values, **overrides)
    config.architectures = [architecture]
    if architecture.startswith("Qwen2") and config.pad_token_id is None:
        config.pad_token_id = config.eos_token_id  # what a user's code sets for a decoder
    return config


def auto_class(architecture: str) -> str:
    """The auto class of an architecture's head."""
    for suffix, auto in AUTO_FOR.items():
        if architecture.endswith(suffix):
            return auto
    raise KeyError(architecture)


def cast_bf16_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """A user's step: the model in bf16 (`model.to`), then its own loss."""
    model.to(torch.bfloat16)
    return model(**batch).loss
