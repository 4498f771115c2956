"""LoRA and QLoRA: the spec, the wrapped graph's counts and memory, the 4-bit arithmetic, the
CLI flags and errors, and a real CPU step through peft agreeing with the estimate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from trainfit.cli.main import main
from trainfit.errors import MeasureError, SpecError
from trainfit.estimator.labels import FigureLabel, How
from trainfit.estimator.result import QloraModelled
from trainfit.estimator.step import estimate
from trainfit.measure.steps import measure
from trainfit.models.quantized import Linear4bitStandIn, quantized_bytes
from trainfit.models.source import build_program
from trainfit.provenance import Provenance
from trainfit.report.estimate import estimate_dict
from trainfit.report.model import lora_text
from trainfit.spec import LoraSpec, TrainSpec

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tiny-llama")
    transformers.LlamaConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
        max_position_embeddings=256,
    ).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tiny-gpt2")
    transformers.GPT2Config(
        n_embd=128, n_layer=2, n_head=4, vocab_size=512, n_positions=256
    ).save_pretrained(path)
    return str(path)


def _real_peft(directory: str, **config: object) -> tuple[int, int]:
    """(trainable, all) as peft reports them for the real model built on the CPU."""
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.from_pretrained(directory)
    )
    wrapped = peft.get_peft_model(model, peft.LoraConfig(**config))
    return wrapped.get_nb_trainable_parameters()


# --- the spec ---------------------------------------------------------------------------------


def test_spec_defaults_and_dict() -> None:
    spec = TrainSpec(model="gpt2", lora={"rank": 16, "targets": "q_proj,v_proj"})
    assert spec.lora == LoraSpec(rank=16, alpha=32.0, targets=("q_proj", "v_proj"))
    assert lora_text(spec.lora) == "LoRA r=16 alpha=32 dropout=0 on q_proj,v_proj"


def test_spec_collects_every_problem() -> None:
    with pytest.raises(SpecError) as info:
        TrainSpec(model="gpt2", batch=0, lora={"rank": 0, "dropout": 1.0})
    assert info.value.problems == (
        "LoRA rank must be a positive integer, got 0",
        "LoRA dropout must be in [0, 1), got 1.0",
        "batch must be a positive integer, got 0",
    )


def test_spec_unknown_field() -> None:
    with pytest.raises(SpecError, match=r"unknown LoRA field\(s\) ranke; choose from alpha"):
        TrainSpec(model="gpt2", lora={"ranke": 4})


# --- the wrapped graph ------------------------------------------------------------------------


@pytest.mark.slow
def test_trainable_count_is_peft_s(llama_dir: str, gpt2_dir: str) -> None:
    for directory, targets in ((llama_dir, ("q_proj", "v_proj")), (gpt2_dir, ("c_attn",))):
        est = estimate(model=directory, batch=2, seq_len=64, lora={"rank": 8})
        trainable, total = _real_peft(directory, r=8, target_modules=list(targets))
        assert (est.trainable_parameter_count, est.parameter_count) == (trainable, total)
    est = estimate(model=llama_dir, batch=2, seq_len=64, lora={"rank": 4, "targets": "gate_proj"})
    assert (
        est.trainable_parameter_count == _real_peft(llama_dir, r=4, target_modules=["gate_proj"])[0]
    )


def test_lora_memory_and_adamw_state(llama_dir: str) -> None:
    common = dict(model=llama_dir, batch=4, seq_len=128, precision="bf16")
    full = estimate(**common)
    lora = estimate(**common, lora={"rank": 8})
    assert lora.device_memory_needed_bytes < full.device_memory_needed_bytes
    # AdamW: two fp32 moments per LoRA parameter, nothing for the frozen base
    assert lora.breakdown.optimizer_state == 2 * 4 * lora.trainable_parameter_count
    data = estimate_dict(lora)
    assert data["lora"] == {
        "rank": 8,
        "alpha": 16.0,
        "dropout": 0.0,
        "targets": [],
        "qlora": False,
    }
    assert data["trainable_parameters"] == lora.trainable_parameter_count
    assert "q_proj,v_proj (the default)" in data["model"]


def test_checkpointing_lowers_lora_activations(llama_dir: str) -> None:
    common = dict(model=llama_dir, batch=4, seq_len=128, precision="bf16", lora={"rank": 8})
    plain = estimate(**common)
    checkpointed = estimate(**common, checkpointing=True)
    assert checkpointed.breakdown.activations < plain.breakdown.activations
    assert checkpointed.trainable_parameter_count == plain.trainable_parameter_count


# --- QLoRA ------------------------------------------------------------------------------------


def test_quantized_bytes_arithmetic() -> None:
    # 768 x 2304 (GPT-2's c_attn): 884,736 packed bytes, 27,648 uint8 absmax, 108 fp32 absmax
    assert quantized_bytes(768 * 2304) == 884_736 + 27_648 + 4 * 108
    assert quantized_bytes(64) == 32 + 1 + 4


def test_qlora_parameter_bytes_exact(llama_dir: str) -> None:
    """Parameters: 4-bit Linears (all but lm_head), bf16 for the rest, fp32 LoRA adapters."""
    spec = TrainSpec(
        model=llama_dir, batch=2, seq_len=64, precision="bf16", lora={"rank": 8, "qlora": True}
    )
    real = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.from_pretrained(llama_dir)
    )
    quantized = {
        n: m.weight.numel()
        for n, m in real.named_modules()
        if isinstance(m, torch.nn.Linear) and n != "lm_head"
    }
    wrapped = build_program(spec, "meta").model
    stand_ins = {
        n.removeprefix("base_model.model.").removesuffix(".base_layer"): m
        for n, m in wrapped.named_modules()
        if isinstance(m, Linear4bitStandIn)
    }
    assert set(stand_ins) == set(quantized)
    for name, module in stand_ins.items():
        held = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
        numel = quantized[name]
        blocks = numel // 64  # every size here is a multiple of 64
        assert held == quantized_bytes(numel) == numel // 2 + blocks + 4 * -(-blocks // 256)
    lora = [p for p in wrapped.parameters() if p.requires_grad]
    assert all(p.dtype == torch.float32 for p in lora)
    others = [p for n, p in real.named_parameters() if n.removesuffix(".weight") not in quantized]
    tensors = [
        *(n // 2 for n in quantized.values()),  # packed codes
        *(n // 64 for n in quantized.values()),  # uint8 block absmax
        *(4 * -(-n // 64 // 256) for n in quantized.values()),  # fp32 absmax of the absmax
        *(2 * p.numel() for p in others),
        *(4 * p.numel() for p in lora),
        *(2 * b.numel() for b in real.buffers()),  # the rotary table, cast to bf16 with the rest
    ]
    est = estimate(spec)
    # the breakdown holds the allocator's blocks: each tensor rounded up to 512 bytes
    assert est.breakdown.parameters == sum(-(-t // 512) * 512 for t in tensors)
    assert est.parameter_count == sum(p.numel() for p in real.parameters()) + sum(
        p.numel() for p in lora
    )
    # ~0.5 byte per quantised weight: packed codes plus 1/64 + 1/4096 of scales
    assert sum(quantized_bytes(n) for n in quantized.values()) / sum(
        quantized.values()
    ) == pytest.approx(0.5 + 1 / 64 + 4 / (64 * 256), rel=1e-4)
    assert est.labels["qlora"] == FigureLabel(Provenance.MODELLED, How.QLORA)
    assert QloraModelled() in est.notes
    assert any(note.startswith("QLoRA is modelled") for note in estimate_dict(est)["notes"])


def test_qlora_uses_paged_8bit_state_and_less_memory(llama_dir: str) -> None:
    common = dict(model=llama_dir, batch=2, seq_len=64, precision="bf16")
    lora = estimate(**common, lora={"rank": 32})
    qlora = estimate(**common, lora={"rank": 32, "qlora": True})
    assert qlora.breakdown.parameters < lora.breakdown.parameters
    assert qlora.device_memory_needed_bytes < lora.device_memory_needed_bytes
    # 8-bit AdamW: two uint8 moments (+ an fp32 scale per 256) for tensors of 4096+ elements,
    # two fp32 moments below (bitsandbytes' min_8bit_size); per layer at rank 32 the adapters
    # are q A 32x128, q B 128x32, v A 32x128 (8-bit) and v B 64x32 (fp32), in 512-byte blocks
    eight = 2 * (4096 + 512)  # uint8 moment (4096 B) and its 16 fp32 scales (one 512 B block)
    per_layer = 3 * eight + 2 * 4 * 64 * 32
    assert qlora.breakdown.optimizer_state == 2 * per_layer


# --- errors -----------------------------------------------------------------------------------


def test_unknown_target_lists_candidates(gpt2_dir: str) -> None:
    with pytest.raises(SpecError) as info:
        estimate(model=gpt2_dir, batch=1, seq_len=32, lora={"rank": 4, "targets": "q_proj"})
    assert str(info.value) == (
        "LoRA target module 'q_proj' is not in the model; its Linear modules are named "
        "c_attn, c_fc, c_proj"
    )


@pytest.mark.parametrize(
    ("body", "known"),
    [
        (
            "nn.Linear(8, 4)",
            "its only Linear module, 'head', is the output head (adapt it with "
            "--lora-targets head)",
        ),
        ("nn.Conv1d(8, 4, 1)", "it has no Linear module for adapters"),
    ],
)
def test_unknown_target_on_a_model_without_candidates_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, known: str
) -> None:
    (tmp_path / "one_head_mod.py").write_text(
        "from torch import nn\n\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        f"        self.head = {body}\n\n"
        "    def forward(self, x):\n"
        "        return self.head(x)\n\n\n"
        "def make():\n"
        "    return M()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "one_head_mod", raising=False)
    with pytest.raises(SpecError) as info:
        estimate(model="one_head_mod:make", inputs=("x=B,8",), lora={"rank": 4, "targets": "q"})
    assert str(info.value) == f"LoRA target module 'q' is not in the model; {known}"


def test_cli_errors_one_line(capsys: pytest.CaptureFixture[str], gpt2_dir: str) -> None:
    cases = [
        (["--lora-alpha", "16"], "--lora-alpha given without --lora RANK: add --lora RANK"),
        (["--lora", "0"], "LoRA rank must be a positive integer, got 0"),
        (["--lora", "4", "--lora-dropout", "1.5"], "LoRA dropout must be in [0, 1), got 1.5"),
        (["--lora", "4", "--lora-targets", "wq"], "LoRA target module 'wq' is not in the model"),
    ]
    for flags, message in cases:
        assert main(["estimate", gpt2_dir, "--seq", "32", *flags]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1


def test_measure_refuses_qlora(llama_dir: str) -> None:
    spec = TrainSpec(model=llama_dir, seq_len=32, device="cpu", lora={"rank": 4, "qlora": True})
    with pytest.raises(MeasureError, match=r"pip install bitsandbytes"):
        measure(spec, steps=1, warmup=1, device="cpu")


# --- CLI and a real run -----------------------------------------------------------------------


def test_cli_estimate_json(capsys: pytest.CaptureFixture[str], gpt2_dir: str) -> None:
    assert main(["estimate", gpt2_dir, "--seq", "32", "--qlora", "--lora-targets", "c_attn",
                 "--precision", "bf16", "--json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert data["lora"]["qlora"] is True and data["lora"]["rank"] == 8
    assert data["trainable_parameters"] < data["parameters"]
    assert "modelled" in data["labels"]["qlora"]


def test_cli_estimate_text(capsys: pytest.CaptureFixture[str], gpt2_dir: str) -> None:
    assert main(["estimate", gpt2_dir, "--seq", "32", "--lora", "4"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "LoRA r=4 alpha=8 dropout=0 on c_attn (the default)" in out
    # c_attn 128 -> 384 in 2 layers: 2 x (4 x 128 + 384 x 4)
    assert "trainable with LoRA: 4,096 of" in out


@pytest.mark.slow
def test_real_cpu_run_state_agrees(llama_dir: str) -> None:
    """`trainfit measure --lora` on the CPU runs peft; its state bytes are the estimate's."""
    spec = TrainSpec(model=llama_dir, batch=2, seq_len=32, device="cpu", lora={"rank": 4})
    measured = measure(spec, steps=1, warmup=1, device="cpu")
    est = estimate(dataclass_replace(spec, device="h100"))
    adapters = [n for n in ("q_proj", "v_proj") for _ in ("A", "B")] * 2
    # two fp32 moments per adapter weight; on the CPU the step counters are CPU tensors too
    assert est.breakdown.optimizer_state == 2 * 4 * est.trainable_parameter_count
    assert measured.optimizer_state_bytes == est.breakdown.optimizer_state + 4 * len(adapters)
    assert measured.gradient_bytes == 4 * est.trainable_parameter_count
    assert measured.parameter_bytes == 4 * est.parameter_count  # fp32, the base frozen


def dataclass_replace(spec: TrainSpec, **changes: object) -> TrainSpec:
    import dataclasses

    return dataclasses.replace(spec, **changes)


@pytest.mark.slow
def test_plan_keeps_lora(capsys: pytest.CaptureFixture[str], llama_dir: str) -> None:
    argv = ["plan", llama_dir, "--effective-batch", "8", "--seq", "64", "--device", "h100"]
    assert main([*argv, "--lora", "4", "--lora-targets", "q_proj", "--jobs", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["lora"] == {
        "rank": 4,
        "alpha": 8.0,
        "dropout": 0.0,
        "targets": ["q_proj"],
        "qlora": False,
    }
    # the ladder's rungs are LoRA steps: its first rung (fp32, 8 x 1) is the LoRA estimate
    first = data["ladder"][0]
    assert (first["micro_batch"], first["grad_accum"]) == (8, 1)
    common = dict(model=llama_dir, batch=8, seq_len=64, precision="fp32")
    lora = estimate(**common, lora={"rank": 4, "targets": "q_proj"})
    assert first["needed_bytes"] == lora.device_memory_needed_bytes
    assert first["needed_bytes"] != estimate(**common).device_memory_needed_bytes


def test_peft_missing_is_named(monkeypatch: pytest.MonkeyPatch, llama_dir: str) -> None:
    import sys

    from trainfit.errors import ModelLoadError

    monkeypatch.setitem(sys.modules, "peft", None)  # import peft raises ImportError
    with pytest.raises(ModelLoadError, match=r"^LoRA needs peft: pip install peft$"):
        estimate(model=llama_dir, seq_len=32, lora={"rank": 4})
    spec = TrainSpec(model=llama_dir, seq_len=32, device="cpu", lora={"rank": 4})
    with pytest.raises(MeasureError, match=r"^--lora needs peft for a real run: pip install peft$"):
        measure(spec, steps=1, warmup=1, device="cpu")
