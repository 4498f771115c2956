"""The weights' dtype as the user's code loads them (`--weights-dtype`, `--reference-dtype`) and
transformers' own use_cache (`--no-cache`): the spec, the built model, the estimate."""

from __future__ import annotations

import json

import pytest
import torch

import trainfit
from trainfit.cli.main import main
from trainfit.errors import SpecError
from trainfit.models.preference import reference_of
from trainfit.models.source import build_program
from trainfit.report.estimate import estimate_dict
from trainfit.spec import TrainSpec, WeightsDtype

pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

SEQ = 64


@pytest.fixture(scope="module")
def bf16_lm(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A two-layer Llama-shaped causal LM whose config declares bf16 (as current LLMs do)."""
    where = tmp_path_factory.mktemp("tiny-llama-bf16")
    config = transformers.LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=4096,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    config.dtype = torch.bfloat16
    config.save_pretrained(where)
    return str(where)


@pytest.fixture(scope="module")
def gpt2_default(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny GPT-2 from the default config (use_cache True)."""
    where = tmp_path_factory.mktemp("tiny-gpt2-default")
    transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=128
    ).save_pretrained(where)
    return str(where)


def _dtypes(model: torch.nn.Module, trainable: bool) -> set[torch.dtype]:
    return {p.dtype for p in model.parameters() if p.requires_grad is trainable}


# --- the spec ---------------------------------------------------------------------------------


def test_unknown_dtype_lists_the_choices() -> None:
    with pytest.raises(SpecError, match="choose one of auto, bf16, fp16, fp32"):
        TrainSpec(model="gpt2", weights_dtype="int8")
    with pytest.raises(SpecError, match="reference dtype"):
        TrainSpec(model="gpt2", preference="dpo", reference_dtype="fp64")


def test_full_fine_tune_dtypes_are_refused_unless_pure_bf16() -> None:
    with pytest.raises(SpecError, match="pure bf16: add --precision pure-bf16"):
        TrainSpec(model="gpt2", weights_dtype="bf16", precision="bf16")
    with pytest.raises(SpecError, match="fp16 on a full fine-tune"):
        TrainSpec(model="gpt2", weights_dtype="fp16")
    with pytest.raises(SpecError, match="conflicts with --precision pure-bf16"):
        TrainSpec(model="gpt2", weights_dtype="fp32", precision="pure-bf16")
    spec = TrainSpec(model="gpt2", weights_dtype="bf16", precision="pure-bf16")
    assert spec.weights_dtype is WeightsDtype.BF16


def test_reference_dtype_needs_a_reference_model() -> None:
    with pytest.raises(SpecError, match="needs a reference model"):
        TrainSpec(model="gpt2", reference_dtype="bf16")
    with pytest.raises(SpecError, match="needs a reference model"):
        TrainSpec(model="gpt2", preference="dpo", reference="precomputed", reference_dtype="bf16")


def test_use_cache_must_be_a_bool() -> None:
    with pytest.raises(SpecError, match="use_cache must be true, false or unset"):
        TrainSpec(model="gpt2", use_cache="yes")


# --- auto, per model kind ---------------------------------------------------------------------


def test_auto_puts_a_catalog_bf16_models_lora_base_in_bf16() -> None:
    program = build_program(TrainSpec(model="qwen2-0.5b", lora={"rank": 8}), "meta")
    assert _dtypes(program.model, trainable=False) == {torch.bfloat16}
    assert _dtypes(program.model, trainable=True) == {torch.float32}  # peft's fp32 adapters


def test_full_fine_tune_keeps_fp32_master_weights() -> None:
    program = build_program(TrainSpec(model="qwen2-0.5b"), "meta")
    assert _dtypes(program.model, trainable=True) == {torch.float32}


def test_auto_is_fp32_for_a_plain_module_and_a_float32_config() -> None:
    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=4, lora={"rank": 4})
    assert _dtypes(build_program(spec, "meta").model, trainable=False) == {torch.float32}
    gpt2 = build_program(TrainSpec(model="gpt2", lora={"rank": 4}), "meta")
    assert _dtypes(gpt2.model, trainable=False) == {torch.float32}


def test_a_local_bf16_config_is_honoured_and_can_be_overridden(bf16_lm: str) -> None:
    auto = build_program(TrainSpec(model=bf16_lm, lora={"rank": 4}), "meta")
    assert _dtypes(auto.model, trainable=False) == {torch.bfloat16}
    fp32 = build_program(TrainSpec(model=bf16_lm, lora={"rank": 4}, weights_dtype="fp32"), "meta")
    assert _dtypes(fp32.model, trainable=False) == {torch.float32}
    full = build_program(TrainSpec(model=bf16_lm), "meta")
    assert _dtypes(full.model, trainable=True) == {torch.float32}


def test_a_lora_estimate_on_a_bf16_base_holds_half_the_frozen_bytes(bf16_lm: str) -> None:
    common = dict(model=bf16_lm, batch=2, seq_len=SEQ, precision="bf16", lora={"rank": 4})
    bf16 = trainfit.estimate(**common)
    fp32 = trainfit.estimate(**common, weights_dtype="fp32")
    adapters = bf16.trainable_parameter_count * 4
    frozen_bf16 = bf16.breakdown.parameters - adapters
    frozen_fp32 = fp32.breakdown.parameters - adapters
    assert frozen_bf16 == pytest.approx(frozen_fp32 / 2, rel=0.02)
    assert bf16.dtypes is not None
    assert bf16.dtypes.weights == "bf16 frozen, fp32 trainable"
    assert bf16.dtypes.gradients == "fp32"
    assert estimate_dict(bf16)["dtypes"]["optimizer_state"] == "fp32"
    assert estimate_dict(bf16)["spec"].get("weights_dtype") is None  # auto: the default
    assert estimate_dict(fp32)["spec"]["weights_dtype"] == "fp32"


def test_reference_dtype_casts_the_reference_copy_only(bf16_lm: str) -> None:
    spec = TrainSpec(model=bf16_lm, batch=2, seq_len=SEQ, preference="dpo", reference_dtype="bf16")
    program = build_program(spec, "meta")
    reference = reference_of(program.model)
    assert reference is not None
    assert {p.dtype for p in reference.parameters()} == {torch.bfloat16}
    assert _dtypes(program.model, trainable=True) == {torch.float32}
    same = build_program(TrainSpec(model=bf16_lm, batch=2, seq_len=SEQ, preference="dpo"), "meta")
    assert {p.dtype for p in reference_of(same.model).parameters()} == {torch.float32}
    auto = build_program(
        TrainSpec(model=bf16_lm, batch=2, seq_len=SEQ, preference="dpo", reference_dtype="auto"),
        "meta",
    )
    assert {p.dtype for p in reference_of(auto.model).parameters()} == {torch.bfloat16}


def test_a_bf16_reference_saves_half_its_bytes(bf16_lm: str) -> None:
    common = dict(model=bf16_lm, batch=2, seq_len=SEQ, precision="bf16", preference="dpo")
    fp32 = trainfit.estimate(**common)
    bf16 = trainfit.estimate(**common, reference_dtype="bf16")
    reference_fp32 = fp32.parameter_count * 4  # NB: the counts leave the copy out
    assert fp32.breakdown.parameters - bf16.breakdown.parameters == pytest.approx(
        reference_fp32 / 2, rel=0.02
    )


# --- use_cache --------------------------------------------------------------------------------


def test_a_users_config_keeps_its_use_cache_unless_asked(gpt2_default: str) -> None:
    kept = build_program(TrainSpec(model=gpt2_default, seq_len=SEQ), "meta")
    assert kept.model.config.use_cache is True
    off = build_program(TrainSpec(model=gpt2_default, seq_len=SEQ, use_cache=False), "meta")
    assert off.model.config.use_cache is False
    catalog = build_program(TrainSpec(model="gpt2", seq_len=SEQ), "meta")
    assert catalog.model.config.use_cache is False


def test_no_cache_option(gpt2_default: str, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["estimate", gpt2_default, "--device", "h100", "--batch", "4", "--seq", "128"]
    assert main([*common, "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert main([*common, "--no-cache", "--json"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["spec"]["use_cache"] is False
    assert "use_cache" not in kept["spec"]
    # NB: the cache holds each layer's keys and values through the step
    assert kept["device_memory_needed_bytes"] >= off["device_memory_needed_bytes"]


# --- devices without bf16 ---------------------------------------------------------------------


def test_bf16_weights_on_a_t4_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SpecError, match=r"T4.*compute capability 7.5.*has no bf16"):
        build_program(TrainSpec(model="qwen2-0.5b", lora={"rank": 8}, device="t4"), "meta")
    spec = TrainSpec(model="qwen2-0.5b", lora={"rank": 8}, device="t4", weights_dtype="fp16")
    assert _dtypes(build_program(spec, "meta").model, trainable=False) == {torch.float16}
    code = main(["estimate", "qwen2-0.5b", "--device", "t4", "--lora", "8", "--seq", "128"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no bf16" in err[0]
