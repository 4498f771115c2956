"""What a model is and how its loss is computed, in words: a result's typed description
(`trainfit.models.program.Description`) and loss note, for the reports and the JSON."""

from __future__ import annotations

from trainfit.models.heads import MULTIPLE_CHOICES, HfTask
from trainfit.models.program import Description, LossNote, OwnLoss, TaskNote

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


def description_text(description: Description, generating: bool = False) -> str:
    """Where a model came from, its task and what wraps its training, in words."""
    task = "" if description.task is None else f", {task_text(description.task, generating)}"
    wrappers = "".join(f"; {w}" for w in description.wrappers)
    return f"{description.source}: {description.model}{task}{wrappers}"


def loss_text(note: LossNote) -> str:
    """How the loss is computed, in words."""
    if isinstance(note, OwnLoss):
        return f"the model's own loss ({task_text(note.task)})"
    return note
