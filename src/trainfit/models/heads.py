"""Which transformers class a Hugging Face model is built as, and the batch its head trains on.

A task is named the way transformers names its auto classes, in kebab case:
`AutoModelForSequenceClassification` is `sequence-classification`, `AutoModelForCausalLM` is
`causal-lm`. `--task` takes either spelling (`parse_task`). The class is chosen, in order:

1. `--task` (the spec's `task`): the task's class for the config's model type;
2. a catalog row's task;
3. the config's `architectures` (what `from_pretrained` builds for a config.json): the class it
   names, when it has a head trainfit builds. One naming a model without a training head
   (`BertModel`) leaves the choice to the next rule; any other is an error listing the classes
   trainfit can build for the model type;
4. the model type's usual pre-training task (masked LM for BERT-like encoders, causal LM
   otherwise).

`choose_class` returns the choice as a typed `ModelClass` (the class, its task, and which rule
chose it); the report says it in words. `head_inputs` gives the inputs each head's loss takes,
with labels shaped for it: a class per sequence (sequence classification: a float per label
when the config's `problem_type` is multi-label, one float for a single-label regression), a
class per token (token classification), a start and an end position (question answering), the
right choice among `MULTIPLE_CHOICES` (multiple choice). The label count is the config's
`num_labels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch

from trainfit.errors import ModelLoadError, SpecError
from trainfit.spec import InputSpec

MULTIPLE_CHOICES = 4
"""Choices per example of a multiple-choice head (SWAG's four endings): transformers' configs
do not say, and the batch is (batch, choices, sequence)."""


class HfTask(str, Enum):
    """A transformers task: the kebab-case name of its auto class (AutoModelFor...)."""

    CAUSAL_LM = "causal-lm"
    MASKED_LM = "masked-lm"
    SEQ2SEQ_LM = "seq2seq-lm"
    SPEECH_SEQ2SEQ = "speech-seq2seq"
    IMAGE_CLASSIFICATION = "image-classification"
    SEQUENCE_CLASSIFICATION = "sequence-classification"
    TOKEN_CLASSIFICATION = "token-classification"
    QUESTION_ANSWERING = "question-answering"
    MULTIPLE_CHOICE = "multiple-choice"


AUTO_CLASS: dict[HfTask, str] = {
    HfTask.CAUSAL_LM: "AutoModelForCausalLM",
    HfTask.MASKED_LM: "AutoModelForMaskedLM",
    HfTask.SEQ2SEQ_LM: "AutoModelForSeq2SeqLM",
    HfTask.SPEECH_SEQ2SEQ: "AutoModelForSpeechSeq2Seq",
    HfTask.IMAGE_CLASSIFICATION: "AutoModelForImageClassification",
    HfTask.SEQUENCE_CLASSIFICATION: "AutoModelForSequenceClassification",
    HfTask.TOKEN_CLASSIFICATION: "AutoModelForTokenClassification",
    HfTask.QUESTION_ANSWERING: "AutoModelForQuestionAnswering",
    HfTask.MULTIPLE_CHOICE: "AutoModelForMultipleChoice",
}
"""Each task's transformers auto class."""

TEXT_TASKS = frozenset(
    {
        HfTask.CAUSAL_LM,
        HfTask.MASKED_LM,
        HfTask.SEQ2SEQ_LM,
        HfTask.SEQUENCE_CLASSIFICATION,
        HfTask.TOKEN_CLASSIFICATION,
        HfTask.QUESTION_ANSWERING,
        HfTask.MULTIPLE_CHOICE,
    }
)
"""Tasks whose inputs are token ids of one sequence length."""

# Default task by transformers model_type, for configs that name no head.
_TASK_BY_MODEL_TYPE: dict[str, HfTask] = {
    "bert": HfTask.MASKED_LM,
    "roberta": HfTask.MASKED_LM,
    "distilbert": HfTask.MASKED_LM,
    "t5": HfTask.SEQ2SEQ_LM,
    "mt5": HfTask.SEQ2SEQ_LM,
    "bart": HfTask.SEQ2SEQ_LM,
    "whisper": HfTask.SPEECH_SEQ2SEQ,
    "vit": HfTask.IMAGE_CLASSIFICATION,
    "resnet": HfTask.IMAGE_CLASSIFICATION,
    "convnext": HfTask.IMAGE_CLASSIFICATION,
}


class ClassReason(str, Enum):
    """Which rule chose the class (see the module docstring)."""

    TASK_OPTION = "task-option"
    CATALOG = "catalog"
    ARCHITECTURES = "architectures"
    HEADLESS_ARCHITECTURE = "headless-architecture"
    """The config names a model without a training head: the model type's default task."""
    MODEL_TYPE = "model-type"
    """The config names no architecture: the model type's default task."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelClass:
    """The transformers class a model is built as, and why."""

    name: str
    """The class ("DistilBertForSequenceClassification")."""
    task: HfTask
    reason: ClassReason
    architecture: str | None = None
    """The class the config's `architectures` names, where it names one."""

    def to_dict(self) -> dict[str, str | None]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "task": self.task.value,
            "reason": self.reason.value,
            "architecture": self.architecture,
        }


def parse_task(text: str) -> HfTask:
    """A task from its kebab-case name or its auto class's name (`AutoModelForCausalLM`)."""
    wanted = text.strip()
    for task, auto in AUTO_CLASS.items():
        if wanted.lower() in (task.value, auto.lower()):
            return task
    choices = ", ".join(t.value for t in HfTask)
    raise SpecError(
        [f"unknown task {text!r}; choose one of {choices} (or its AutoModelFor... class name)"]
    )


def _mapping_names(task: HfTask) -> dict[str, str | tuple[str, ...]]:
    from transformers.models.auto import modeling_auto

    auto = getattr(modeling_auto, AUTO_CLASS[task])
    return auto._model_mapping._model_mapping  # type: ignore[no-any-return]


def _classes_of(task: HfTask, model_type: str) -> tuple[str, ...]:
    names = _mapping_names(task).get(model_type, ())
    return (names,) if isinstance(names, str) else tuple(names)


def task_of_model(model: object) -> HfTask | None:
    """The task of a built transformers model (by its class and its config's model type);
    None for anything else."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if not isinstance(model_type, str):
        return None
    return _task_of_class(type(model).__name__, model_type)


def _task_of_class(name: str, model_type: str) -> HfTask | None:
    """The task whose auto class builds `name`; where several do (BART's conditional generation
    is both a masked and a sequence-to-sequence LM), the model type's usual task among them."""
    tasks = [
        task
        for task in HfTask
        for names in _mapping_names(task).values()
        if name == names or (isinstance(names, tuple) and name in names)
    ]
    usual = _TASK_BY_MODEL_TYPE.get(model_type)
    if usual in tasks:
        return usual
    return tasks[0] if tasks else None


def _headless(name: str) -> bool:
    from transformers.models.auto import modeling_auto

    for names in modeling_auto.MODEL_MAPPING_NAMES.values():
        if name == names or (isinstance(names, tuple) and name in names):
            return True
    return False


def buildable(model_type: str) -> list[str]:
    """The classes trainfit can build for `model_type`, one per task it has."""
    return [name for task in HfTask for name in _classes_of(task, model_type)[:1]]


def choose_class(
    config: Any, task_option: str | None, catalog_task: str | None, origin: str
) -> ModelClass:
    """The class to build `config` as (see the module docstring for the order of the rules)."""
    model_type = config.model_type
    named = list(getattr(config, "architectures", None) or [])
    architecture = named[0] if named else None
    if task_option is not None:
        task, reason = parse_task(task_option), ClassReason.TASK_OPTION
    elif catalog_task is not None:
        task, reason = parse_task(catalog_task), ClassReason.CATALOG
    elif (
        architecture is not None and (found := _task_of_class(architecture, model_type)) is not None
    ):
        return ModelClass(
            name=architecture,
            task=found,
            reason=ClassReason.ARCHITECTURES,
            architecture=architecture,
        )
    elif architecture is not None and not _headless(architecture):
        raise ModelLoadError(
            f"{origin}: its config names architecture {architecture!r}, which trainfit does not "
            f"build; for model type {model_type!r} it builds {', '.join(buildable(model_type))} "
            f"(choose one with --task: {', '.join(t.value for t in HfTask)})"
        )
    else:
        task = _TASK_BY_MODEL_TYPE.get(model_type) or (
            HfTask.SEQ2SEQ_LM if getattr(config, "is_encoder_decoder", False) else HfTask.CAUSAL_LM
        )
        reason = ClassReason.HEADLESS_ARCHITECTURE if architecture else ClassReason.MODEL_TYPE
    classes = _classes_of(task, model_type)
    if not classes:
        raise ModelLoadError(
            f"{origin}: transformers has no {task.value} class for model type {model_type!r}; "
            f"it has {', '.join(buildable(model_type)) or 'none that trainfit builds'}"
        )
    return ModelClass(name=classes[0], task=task, reason=reason, architecture=architecture)


def prepare_config(config: Any, task: HfTask) -> None:
    """What a user's code sets on the config before training this head: a padding token for a
    decoder's sequence classification (its pooling finds the last token by it)."""
    if (
        task is HfTask.SEQUENCE_CLASSIFICATION
        and getattr(config, "pad_token_id", 0) is None
        and getattr(config, "eos_token_id", None) is not None
    ):
        eos = config.eos_token_id
        config.pad_token_id = eos[0] if isinstance(eos, list) else eos


def head_inputs(task: HfTask, config: Any, rows: int, seq: int) -> list[InputSpec]:
    """The inputs of a classification, token-classification, question-answering or
    multiple-choice head: token ids and labels shaped for the head's loss."""
    vocab = getattr(config, "vocab_size", None)
    labels = int(getattr(config, "num_labels", 2))
    if task is HfTask.MULTIPLE_CHOICE:
        return [
            InputSpec(
                name="input_ids", dims=(rows, MULTIPLE_CHOICES, seq), dtype=torch.int64, high=vocab
            ),
            InputSpec(name="labels", dims=(rows,), dtype=torch.int64, high=MULTIPLE_CHOICES),
        ]
    ids = InputSpec(name="input_ids", dims=(rows, seq), dtype=torch.int64, high=vocab)
    if task is HfTask.TOKEN_CLASSIFICATION:
        return [ids, InputSpec(name="labels", dims=(rows, seq), dtype=torch.int64, high=labels)]
    if task is HfTask.QUESTION_ANSWERING:
        return [
            ids,
            InputSpec(name="start_positions", dims=(rows,), dtype=torch.int64, high=seq),
            InputSpec(name="end_positions", dims=(rows,), dtype=torch.int64, high=seq),
        ]
    if task is not HfTask.SEQUENCE_CLASSIFICATION:
        raise AssertionError(f"{task.value} has no head inputs")
    problem = sequence_problem(config)
    if problem == "multi_label_classification":
        return [ids, InputSpec(name="labels", dims=(rows, labels), dtype=torch.float32)]
    if problem == "regression":
        return [ids, InputSpec(name="labels", dims=(rows,), dtype=torch.float32)]
    return [ids, InputSpec(name="labels", dims=(rows,), dtype=torch.int64, high=labels)]


def sequence_problem(config: Any) -> str:
    """transformers' `problem_type` for a sequence-classification head: the config's, else
    regression for one label and single-label classification for more (its forward's rule)."""
    given = getattr(config, "problem_type", None)
    if given:
        return str(given)
    return (
        "regression"
        if int(getattr(config, "num_labels", 2)) == 1
        else "single_label_classification"
    )
