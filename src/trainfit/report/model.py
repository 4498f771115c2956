"""What a model is and how its loss is computed, in words: a result's typed description
(`trainfit.models.program.Description`) and loss note, for the reports and the JSON."""

from __future__ import annotations

from trainfit.models.heads import MULTIPLE_CHOICES, HfTask
from trainfit.models.live_names import is_live, model_name
from trainfit.models.program import (
    Adapters,
    DefaultLoss,
    Description,
    LossNote,
    OwnLoss,
    TaskNote,
    UserLoss,
    UserStep,
)
from trainfit.spec import LoraSpec

_TASK_WORDS = {
    HfTask.CAUSAL_LM: "causal LM, labels = input ids",
    HfTask.MASKED_LM: "masked LM, labels on every position",
    HfTask.SEQ2SEQ_LM: "sequence-to-sequence LM with labels",
    HfTask.SPEECH_SEQ2SEQ: "speech sequence-to-sequence with labels",
    HfTask.IMAGE_CLASSIFICATION: "image classification, cross-entropy",
    HfTask.SEQUENCE_CLASSIFICATION: "sequence classification",
    HfTask.TOKEN_CLASSIFICATION: "token classification",
    HfTask.QUESTION_ANSWERING: "extractive question answering, cross-entropy over start and end",
    HfTask.MULTIPLE_CHOICE: f"multiple choice over {MULTIPLE_CHOICES} choices, cross-entropy",
}

_PROBLEM_LOSS = {
    "regression": "mean squared error",
    "multi_label_classification": "binary cross-entropy per label",
}


def _labels(count: int) -> str:
    return "1 label" if count == 1 else f"{count} labels"


def task_text(note: TaskNote, generating: bool = False) -> str:
    """A transformers model's task in words; `generating`: a causal LM's generate(), which
    has no labels."""
    if generating and note.task is HfTask.CAUSAL_LM:
        return "causal LM"
    words = _TASK_WORDS[note.task]
    if note.task is HfTask.SEQUENCE_CLASSIFICATION:
        loss = _PROBLEM_LOSS.get(note.problem, "cross-entropy")
        return f"{words} over {_labels(note.labels)}, {loss}"
    if note.task is HfTask.TOKEN_CLASSIFICATION:
        return f"{words} over {_labels(note.labels)}, cross-entropy per token"
    return words


def lora_text(lora: LoraSpec, default: str = "") -> str:
    """One line: `LoRA r=16 alpha=32 dropout=0.05 on q_proj,v_proj` (QLoRA: 4-bit base);
    `default` names the modules adapted when no targets were given."""
    what = "QLoRA (4-bit NF4 base, modelled)" if lora.qlora else "LoRA"
    if lora.targets:
        targets = ",".join(lora.targets)
    else:
        targets = f"{default} (the default)" if default else "the default modules"
    return f"{what} r={lora.rank} alpha={lora.alpha:g} dropout={lora.dropout:g} on {targets}"


def adapters_text(adapters: Adapters) -> str:
    """The LoRA adapters a model is wrapped with, in words."""
    return lora_text(adapters.lora, adapters.default_targets)


def description_text(description: Description, generating: bool = False) -> str:
    """Where a model came from, its task, its LoRA adapters and preference loss, in words."""
    task = "" if description.task is None else f", {task_text(description.task, generating)}"
    lora = "" if description.lora is None else f"; {adapters_text(description.lora)}"
    dpo = description.preference
    preference = "" if dpo is None else f"; DPO over pairs, {dpo_reference_text(dpo.precomputed)}"
    return f"{description.source}: {description.model}{task}{lora}{preference}"


def loss_text(note: LossNote) -> str:
    """How the loss is computed, in words."""
    if isinstance(note, OwnLoss):
        return f"the model's own loss ({task_text(note.task)})"
    if isinstance(note, UserLoss):
        return f"user loss {note.path}(output, batch)"
    if isinstance(note, UserStep) and is_live(note.path):
        return (
            f"the step of the live {model_name(note.path)}: its forward on its sample's "
            "structure, then its loss"
        )
    if isinstance(note, UserStep):
        return f"user step function {note.path}"
    if isinstance(note, DefaultLoss):
        return "cross-entropy for (N, C) outputs, else the mean of the output (trainfit's default)"
    return (
        f"DPO sigmoid loss (beta {note.beta}) on per-sequence log-prob sums; chosen and "
        f"rejected in one forward of 2 x batch sequences; {dpo_reference_text(note.precomputed)}"
    )


def dpo_reference_text(precomputed: bool) -> str:
    """Where a DPO step's reference log-probs come from, in words."""
    return (
        "reference log-probs precomputed (in the batch)"
        if precomputed
        else "frozen reference copy on the device (no_grad)"
    )
