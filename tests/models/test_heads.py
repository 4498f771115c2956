"""The class a transformers config is built as (its `architectures`, `--task`), and each head's
labels shaped for its loss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from trainfit.errors import ModelLoadError, SpecError
from trainfit.models.heads import (
    MULTIPLE_CHOICES,
    ClassReason,
    HfTask,
    choose_class,
    parse_task,
    task_of_model,
)
from trainfit.models.source import build_program
from trainfit.report.estimate import estimate_dict
from trainfit.report.model import description_text
from trainfit.spec import TrainSpec

transformers = pytest.importorskip("transformers")

BERT = dict(
    num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=97
)


def _config_dir(root: Path, config: Any, architecture: str | None) -> str:
    if architecture is not None:
        config.architectures = [architecture]
    where = root / (architecture or config.model_type)
    config.save_pretrained(where)
    return str(where)


def test_task_names_follow_the_auto_classes() -> None:
    assert parse_task("sequence-classification") is HfTask.SEQUENCE_CLASSIFICATION
    assert parse_task("AutoModelForSequenceClassification") is HfTask.SEQUENCE_CLASSIFICATION
    assert parse_task("AutoModelForCausalLM") is HfTask.CAUSAL_LM
    with pytest.raises(SpecError, match="multiple-choice"):
        parse_task("text-classification")


def test_the_config_architectures_decide_the_class(tmp_path: Path) -> None:
    config = transformers.DistilBertConfig(n_layers=1, dim=32, hidden_dim=64, n_heads=2)
    model = _config_dir(tmp_path, config, "DistilBertForSequenceClassification")
    program = build_program(TrainSpec(model=model, batch=3, seq_len=16), "meta")
    assert type(program.model).__name__ == "DistilBertForSequenceClassification"
    assert program.model_class is not None
    assert program.model_class.reason is ClassReason.ARCHITECTURES
    batch = program.make_batch(torch.device("cpu"), True)
    assert batch["labels"].shape == (3,) and int(batch["labels"].max()) < config.num_labels
    words = description_text(program.description)
    assert "sequence classification over 2 labels, cross-entropy" in words


def test_the_task_option_wins_over_the_architectures(tmp_path: Path) -> None:
    model = _config_dir(tmp_path, transformers.BertConfig(**BERT), "BertForMaskedLM")
    spec = TrainSpec(model=model, batch=2, seq_len=8, task="AutoModelForTokenClassification")
    chosen = build_program(spec, "meta").model_class
    assert chosen is not None
    assert (chosen.name, chosen.reason, chosen.architecture) == (
        "BertForTokenClassification",
        ClassReason.TASK_OPTION,
        "BertForMaskedLM",
    )


@pytest.mark.parametrize(
    ("architecture", "extra", "shapes"),
    [
        ("BertForTokenClassification", {"num_labels": 9}, {"labels": (2, 16)}),
        ("BertForQuestionAnswering", {}, {"start_positions": (2,), "end_positions": (2,)}),
        ("BertForMultipleChoice", {}, {"input_ids": (2, MULTIPLE_CHOICES, 16), "labels": (2,)}),
        (
            "BertForSequenceClassification",
            {"num_labels": 5, "problem_type": "multi_label_classification"},
            {"labels": (2, 5)},
        ),
        ("BertForSequenceClassification", {"num_labels": 1}, {"labels": (2,)}),
    ],
)
def test_each_head_gets_labels_its_loss_takes(
    tmp_path: Path, architecture: str, extra: dict[str, Any], shapes: dict[str, tuple[int, ...]]
) -> None:
    model = _config_dir(tmp_path, transformers.BertConfig(**BERT, **extra), architecture)
    program = build_program(TrainSpec(model=model, batch=2, seq_len=16), "cpu")
    batch = program.make_batch(torch.device("cpu"), True)
    for name, shape in shapes.items():
        assert tuple(batch[name].shape) == shape
    loss = program.compute_loss(program.model, batch)  # a real forward on the CPU
    assert loss.dim() == 0 and torch.isfinite(loss)
    labels = extra.get("num_labels", 2)
    if architecture == "BertForTokenClassification":
        assert int(batch["labels"].max()) < labels
    if "start_positions" in batch:
        assert int(batch["end_positions"].max()) < 16
    if extra.get("problem_type") or labels == 1:
        assert batch["labels"].dtype == torch.float32


def test_a_decoder_classifier_gets_a_padding_token(tmp_path: Path) -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=97)
    config.bos_token_id = config.eos_token_id = 3
    model = _config_dir(tmp_path, config, "GPT2ForSequenceClassification")
    program = build_program(TrainSpec(model=model, batch=2, seq_len=8), "cpu")
    loss = program.compute_loss(program.model, program.make_batch(torch.device("cpu"), True))
    assert torch.isfinite(loss)
    assert program.model.config.pad_token_id == 3


def test_a_class_of_several_tasks_takes_the_model_types_usual_one() -> None:
    config = transformers.BartConfig(encoder_layers=1, decoder_layers=1, d_model=32)
    config.architectures = ["BartForConditionalGeneration"]  # a masked and a seq2seq LM
    chosen = choose_class(config, None, None, "here")
    assert (chosen.name, chosen.task) == ("BartForConditionalGeneration", HfTask.SEQ2SEQ_LM)


def test_a_built_model_s_task_is_its_class_s() -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64)
    assert task_of_model(transformers.GPT2LMHeadModel(config)) is HfTask.CAUSAL_LM
    assert task_of_model(transformers.GPT2ForSequenceClassification(config)) is (
        HfTask.SEQUENCE_CLASSIFICATION
    )
    assert task_of_model(transformers.GPT2Model(config)) is None  # NB: headless
    assert task_of_model(torch.nn.Linear(2, 2)) is None


def test_a_headless_architecture_takes_the_model_types_task(tmp_path: Path) -> None:
    config = transformers.BertConfig(**BERT)
    chosen = choose_class(config, None, None, "here")
    assert (chosen.name, chosen.reason) == ("BertForMaskedLM", ClassReason.MODEL_TYPE)
    config.architectures = ["BertModel"]
    chosen = choose_class(config, None, None, "here")
    assert chosen.reason is ClassReason.HEADLESS_ARCHITECTURE


def test_an_unknown_architecture_is_one_line_listing_the_buildable_ones() -> None:
    config = transformers.BertConfig(**BERT)
    config.architectures = ["BertForNextSentencePrediction"]
    with pytest.raises(ModelLoadError) as caught:
        choose_class(config, None, None, "here")
    message = str(caught.value)
    assert "\n" not in message
    assert "BertForSequenceClassification" in message and "BertForMultipleChoice" in message


def test_a_task_the_model_type_lacks_is_refused() -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2)
    with pytest.raises(ModelLoadError, match="no multiple-choice class for model type 'gpt2'"):
        choose_class(config, "multiple-choice", None, "here")


def test_the_estimate_says_which_class_was_built(tmp_path: Path) -> None:
    import trainfit
    from trainfit.report.terminal import model_class_words

    config = transformers.DistilBertConfig(n_layers=1, dim=32, hidden_dim=64, n_heads=2)
    model = _config_dir(tmp_path, config, "DistilBertForSequenceClassification")
    result = trainfit.estimate(model=model, batch=2, seq_len=16, device="h100")
    assert result.model_class is not None
    assert estimate_dict(result)["model_class"] == {
        "name": "DistilBertForSequenceClassification",
        "task": "sequence-classification",
        "reason": "architectures",
        "architecture": "DistilBertForSequenceClassification",
    }
    words = model_class_words(result.model_class)
    assert words.startswith("DistilBertForSequenceClassification (sequence-classification)")
    assert "architectures" in words
