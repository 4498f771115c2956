"""A result's model description and loss in words (exact strings)."""

from __future__ import annotations

from trainfit.models.heads import HfTask
from trainfit.models.program import (
    Adapters,
    DefaultLoss,
    Description,
    DpoLoss,
    OwnLoss,
    TaskNote,
    UserLoss,
    UserStep,
)
from trainfit.report.model import description_text, lora_text, loss_text, task_text
from trainfit.spec import LoraSpec


def test_a_task_in_words_with_its_labels_and_loss() -> None:
    lm = TaskNote(task=HfTask.CAUSAL_LM)
    assert task_text(lm) == "causal LM, labels = input ids"
    assert task_text(lm, generating=True) == "causal LM"
    regression = TaskNote(task=HfTask.SEQUENCE_CLASSIFICATION, labels=1, problem="regression")
    assert task_text(regression) == "sequence classification over 1 label, mean squared error"
    tokens = TaskNote(task=HfTask.TOKEN_CLASSIFICATION, labels=5)
    assert task_text(tokens) == "token classification over 5 labels, cross-entropy per token"
    assert all(task_text(TaskNote(task=t)) for t in HfTask)


def test_a_description_names_the_source_task_lora_and_preference() -> None:
    plain = Description(source="m (import)", model="MLP")
    assert description_text(plain) == "m (import): MLP"
    dpo = Description(
        source="gpt2 (catalog)",
        model="gpt2",
        task=TaskNote(task=HfTask.CAUSAL_LM),
        lora=Adapters(lora=LoraSpec(rank=8), default_targets="c_attn"),
        preference=DpoLoss(beta=0.1, precomputed=True),
    )
    assert description_text(dpo) == (
        "gpt2 (catalog): gpt2, causal LM, labels = input ids; LoRA r=8 alpha=16 dropout=0 on "
        "c_attn (the default); DPO over pairs, reference log-probs precomputed (in the batch)"
    )


def test_each_loss_in_words() -> None:
    assert loss_text(OwnLoss(task=TaskNote(task=HfTask.MASKED_LM))) == (
        "the model's own loss (masked LM, labels on every position)"
    )
    assert loss_text(UserLoss(path="a.b:f")) == "user loss a.b:f(output, batch)"
    assert loss_text(UserStep(path="a.b:s")) == "user step function a.b:s"
    assert loss_text(DefaultLoss()).startswith("cross-entropy for (N, C) outputs")
    assert loss_text(DpoLoss(beta=0.1, precomputed=False)) == (
        "DPO sigmoid loss (beta 0.1) on per-sequence log-prob sums; chosen and rejected in one "
        "forward of 2 x batch sequences; frozen reference copy on the device (no_grad)"
    )


def test_lora_in_words_names_its_targets_or_the_default() -> None:
    qlora = LoraSpec(rank=16, alpha=32, dropout=0.05, targets=("q_proj", "v_proj"), qlora=True)
    assert lora_text(qlora) == (
        "QLoRA (4-bit NF4 base, modelled) r=16 alpha=32 dropout=0.05 on q_proj,v_proj"
    )
    assert lora_text(LoraSpec(rank=4)) == "LoRA r=4 alpha=8 dropout=0 on the default modules"
    assert (
        lora_text(LoraSpec(rank=4), "c_attn")
        == "LoRA r=4 alpha=8 dropout=0 on c_attn (the default)"
    )
