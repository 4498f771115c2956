"""Preference (DPO) training: the reference's weights, the doubled activations, a real CPU step
beside its estimate, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from rich.console import Console

import trainfit
from trainfit.cli.main import main
from trainfit.errors import SpecError
from trainfit.measure import measure
from trainfit.models.preference import FrozenReference, reference_of
from trainfit.models.source import build_program
from trainfit.report.model import loss_text
from trainfit.report.terminal import time_renderable
from trainfit.spec import ReferenceKind, TrainSpec
from trainfit.trace.step import Category, StepTrace, trace_step
from trainfit.training import Phase, apply_settings

SEQ = 128


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A two-layer Qwen2-shaped causal LM (config only; 4.4M parameters)."""
    transformers = pytest.importorskip("transformers")
    where = tmp_path_factory.mktemp("tiny-qwen2")
    transformers.Qwen2Config(
        vocab_size=16000,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    ).save_pretrained(where)
    return str(where)


def _kept_after_forward(trace: StepTrace) -> int:
    """Bytes the first forward allocated and still holds when backward starts (what backward
    reads: the activations), as `measure` counts them on a GPU."""
    live: dict[int, int] = {}
    for event in trace.events:
        if event.iteration != 0 or event.phase is Phase.BACKWARD:
            break
        if event.alloc and event.phase is Phase.FORWARD:
            live[event.key] = event.nbytes
        elif not event.alloc:
            live.pop(event.key, None)
    return sum(live.values())


def _created(spec: TrainSpec, category: Category) -> int:
    """Bytes of `category` the traced step's first iteration created."""
    trace = trace_step(spec)
    return sum(
        e.nbytes
        for e in trace.events
        if e.alloc and e.iteration == 0 and trace.categories.get(e.key) is category
    )


@pytest.mark.slow
def test_reference_model_adds_its_weights_and_precomputed_does_not(tiny_lm: str) -> None:
    common = dict(model=tiny_lm, batch=2, seq_len=SEQ, precision="bf16")
    sft = trainfit.estimate(**common)
    dpo = trainfit.estimate(**common, preference="dpo")
    pre = trainfit.estimate(**common, preference="dpo", reference="precomputed")
    # parameters are live all step long: the reference copy is exactly the policy's size again
    assert dpo.breakdown.parameters == 2 * sft.breakdown.parameters
    assert pre.breakdown.parameters == sft.breakdown.parameters
    # only the policy trains: the same gradients and optimizer state, the same counts
    for category in (Category.GRADIENTS, Category.OPTIMIZER_STATE):
        assert _created(TrainSpec(**common, preference="dpo"), category) == _created(
            TrainSpec(**common), category
        )
    assert dpo.parameter_count == sft.parameter_count == dpo.trainable_parameter_count
    assert "frozen reference copy" in loss_text(dpo.loss_note)
    assert "precomputed" in loss_text(pre.loss_note)


@pytest.mark.slow
@pytest.mark.parametrize("reference", ["model", "precomputed"])
def test_activations_double_for_pairs(tiny_lm: str, reference: str) -> None:
    """fp32 (no autocast weight copies, which do not grow with the batch): every tensor the
    forward keeps scales with the sequences it runs, 2 x batch for pairs; the log-softmax the
    DPO loss keeps covers seq-1 positions per sequence where the model's own loss covers seq.
    So the ratio lies in [2 (seq-1)/seq, 2]; 0.5% slack for the few fixed-size tensors."""
    sft = trace_step(TrainSpec(model=tiny_lm, batch=2, seq_len=SEQ))
    dpo = trace_step(
        TrainSpec(model=tiny_lm, batch=2, seq_len=SEQ, preference="dpo", reference=reference)
    )
    ratio = _kept_after_forward(dpo) / _kept_after_forward(sft)
    assert 2 * (SEQ - 1) / SEQ - 0.005 <= ratio <= 2.005, ratio


def test_reference_runs_without_keeping_activations(tiny_lm: str) -> None:
    """The reference runs under no_grad: reference=model keeps what precomputed keeps, while
    its forward raises the forward's peak."""
    spec = dict(model=tiny_lm, batch=2, seq_len=SEQ, preference="dpo")
    model = trace_step(TrainSpec(**spec))
    pre = trace_step(TrainSpec(**spec, reference="precomputed"))
    assert _kept_after_forward(model) == _kept_after_forward(pre)


def test_reference_is_frozen_eval_and_kept_out_of_training(tiny_lm: str) -> None:
    program = build_program(TrainSpec(model=tiny_lm, batch=1, seq_len=16, preference="dpo"), "meta")
    trainable = apply_settings(program, TrainSpec(model=tiny_lm, preference="dpo"))
    ref = reference_of(program.model)
    assert isinstance(ref, FrozenReference)
    assert program.model.training and not ref.training and not ref.model.training
    ref_ids = {id(p) for p in ref.parameters()}
    assert ref_ids and not ref_ids & {id(p) for p in trainable}
    assert program.tokens_per_sample == 32  # a pair: chosen and rejected
    batch = program.make_batch(torch.device("meta"), False)
    assert set(batch) == {"chosen_input_ids", "rejected_input_ids"}
    pre = build_program(
        TrainSpec(model=tiny_lm, batch=3, seq_len=16, preference="dpo", reference="precomputed"),
        "meta",
    )
    assert reference_of(pre.model) is None
    shapes = {k: tuple(v.shape) for k, v in pre.make_batch(torch.device("meta"), False).items()}
    assert shapes["reference_chosen_logps"] == (3,)
    assert shapes["chosen_input_ids"] == (3, 16)


@pytest.mark.slow
@pytest.mark.parametrize("reference", list(ReferenceKind))
def test_real_cpu_step_matches_the_estimate_state_bytes(tiny_lm: str, reference: str) -> None:
    """A real DPO step on the CPU (the same build_program path) holds the parameter, gradient
    and AdamW-state bytes the CPU estimate predicts (0.1%: the CPU allocator's 64-byte
    alignment per tensor)."""
    spec = TrainSpec(
        model=tiny_lm, batch=2, seq_len=32, preference="dpo", reference=reference, device="cpu"
    )
    real = measure(spec, steps=1, warmup=1, device="cpu")
    predicted = trainfit.estimate(spec).breakdown
    assert real.parameter_bytes == pytest.approx(predicted.parameters, rel=1e-3)
    assert real.gradient_bytes == pytest.approx(predicted.gradients, rel=1e-3)
    assert real.optimizer_state_bytes == pytest.approx(predicted.optimizer_state, rel=1e-3)
    plain = build_program(TrainSpec(model=tiny_lm), "meta").model
    policy = sum(p.numel() for p in plain.parameters()) * 4  # fp32: the gradients are these
    assert real.gradient_bytes == policy
    expected = 2 * policy if reference == "model" else policy
    assert real.parameter_bytes == expected


def test_cli_estimate_json_says_pairs(tiny_lm: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "estimate",
            tiny_lm,
            "--batch",
            "2",
            "--seq",
            "32",
            "--preference",
            "dpo",
            "--reference",
            "precomputed",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["spec"]["preference"] == "dpo"
    assert data["spec"]["reference"] == "precomputed"
    assert "DPO" in data["loss"]


def test_cli_estimate_text_labels_pairs(
    tiny_lm: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["estimate", tiny_lm, "--batch", "2", "--seq", "32", "--preference", "dpo"]) == 0
    out = capsys.readouterr().out
    assert "batch 2 pairs (dpo, reference model)" in out
    result = trainfit.estimate(model=tiny_lm, batch=2, seq_len=32, preference="dpo")
    console = Console(width=200, record=True)
    console.print(time_renderable(result))
    assert " pairs/s" in console.export_text()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            dict(model="bert-base-uncased", preference="dpo"),
            "--preference dpo trains causal language models only; bert-base-uncased is masked-lm",
        ),
        (dict(model="trainfit.models.zoo:emotion_mlp", preference="dpo"), "is a plain module"),
        (
            dict(model="gpt2", reference="precomputed"),
            "reference 'precomputed' needs preference training: add --preference dpo",
        ),
        (dict(model="gpt2", preference="ppo"), "unknown preference 'ppo'"),
        (dict(model="gpt2", preference="dpo", reference="policy"), "unknown reference 'policy'"),
        (
            dict(model="gpt2", preference="dpo", step_fn="a.b:c"),
            "--preference computes its own loss",
        ),
        (dict(model="gpt2", preference="dpo", multiplier=2), "--multiplier 2 must be 1"),
    ],
)
def test_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        trainfit.estimate(**kwargs)


def test_cli_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "bert-base-uncased", "--preference", "dpo"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "causal language models only" in err


@pytest.mark.slow
def test_plan_plans_pairs(
    tiny_lm: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code = main(
        [
            "plan",
            tiny_lm,
            "--effective-batch",
            "8",
            "--seq",
            "64",
            "--preference",
            "dpo",
            "--device",
            "h100",
            "--jobs",
            "1",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "effective batch 8 pairs" in out and "pairs/s" in out


@pytest.mark.slow
def test_docs_example_runs() -> None:
    text = (Path(__file__).parents[2] / "docs" / "preference.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/preference.md", "exec"), {})
