"""Layer stamping: a stamped step equals the step traced whole, field by field, or is not used."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from trainfit import LoraSpec, TrainSpec, estimate
from trainfit.errors import TraceError
from trainfit.report.estimate import estimate_dict
from trainfit.trace import stamp, store
from trainfit.trace.stamp import StampNote, Unstamped, stack_layers
from trainfit.trace.step import StepTrace, trace_step

SMALL_LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 128,
    "intermediate_size": 352,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 24,
    "vocab_size": 512,
    "max_position_embeddings": 256,
}


def _config(folder: Path, **values: object) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**SMALL_LLAMA, **values}))
    return str(folder)


def _both(spec: TrainSpec, monkeypatch: pytest.MonkeyPatch) -> tuple[StepTrace, StepTrace]:
    """`spec`'s step with stamping on, and traced whole."""
    monkeypatch.setenv(stamp.SWITCH, "1")
    stamped = trace_step(spec)
    monkeypatch.setenv(stamp.SWITCH, "0")
    whole = trace_step(spec)
    return stamped, whole


def _same(stamped: StepTrace, whole: StepTrace) -> None:
    """Every field downstream reads is equal, the cost log's table and order included."""
    for f in dataclasses.fields(StepTrace):
        if f.name in ("replays", "_names", "store_key", "stamp"):
            continue
        assert getattr(stamped, f.name) == getattr(whole, f.name), f.name
    assert stamped.costs is not None
    assert whole.costs is not None
    for name in ("table", "forward", "backward", "optimizer"):
        assert getattr(stamped.costs, name) == getattr(whole.costs, name), name
    assert stamped.category_names() == whole.category_names()


CASES = {
    "fp32, AdamW": {},
    "bf16, checkpointing": {"precision": "bf16", "checkpointing": True},
    "fp16, 2 micro-batches": {"precision": "fp16", "grad_accum": 2},
    "LoRA rank 8": {"lora": LoraSpec(rank=8)},
    "DPO, bf16": {"preference": "dpo", "precision": "bf16"},
    "fp32, gradient clipping": {"grad_clip": 1.0},
    "pure bf16, SGD": {"precision": "pure-bf16", "optimizer": "sgd"},
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_stamped_llama_step_equals_the_whole_trace(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = TrainSpec(model=_config(tmp_path / "llama"), batch=2, seq_len=64, **CASES[case])
    stamped, whole = _both(spec, monkeypatch)
    assert stamped.stamp is not None
    assert stamped.stamp.why is None, stamped.stamp
    assert whole.stamp == StampNote(None, Unstamped.OFF)
    _same(stamped, whole)


STACKS = {
    "qwen2": {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]},
    "mistral": {
        "model_type": "mistral",
        "architectures": ["MistralForCausalLM"],
        "sliding_window": 32,
    },
}
MORE = {
    "QLoRA": {"lora": LoraSpec(rank=8, qlora=True)},
    "LoRA on bf16 weights": {
        "lora": LoraSpec(rank=8),
        "weights_dtype": "bf16",
        "precision": "bf16",
    },
    "Adafactor": {"optimizer": "adafactor"},
    "SGD momentum, for-loop": {"optimizer": "sgd-momentum", "optimizer_path": "for-loop"},
    "AdamW fused, bf16": {"optimizer_path": "fused", "precision": "bf16"},
    "8-bit AdamW": {"optimizer": "adamw-8bit"},
    "sequence classification": {"task": "sequence-classification"},
    "the cache kept": {"use_cache": True},
    "DPO, precomputed reference": {"preference": "dpo", "reference": "precomputed"},
    "batch 1, 256 tokens": {"batch": 1, "seq_len": 256},
    "qwen2, bf16": {"stack": "qwen2", "precision": "bf16"},
    "mistral, bf16, checkpointing": {
        "stack": "mistral",
        "precision": "bf16",
        "checkpointing": True,
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(MORE))
def test_more_settings_and_stacks_stamp_equal_to_the_whole_trace(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fields = dict(MORE[case])
    stack = STACKS.get(str(fields.pop("stack", "")), {})
    spec = TrainSpec(
        **{"model": _config(tmp_path / "stack", **stack), "batch": 2, "seq_len": 64, **fields}
    )
    stamped, whole = _both(spec, monkeypatch)
    assert stamped.stamp is not None
    assert stamped.stamp.why is None, stamped.stamp
    _same(stamped, whole)


@pytest.mark.slow
def test_a_stamped_gpt2_step_with_tied_embeddings_equals_the_whole_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpt2 = {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "n_embd": 128,
        "n_head": 4,
        "n_layer": 24,
        "n_positions": 256,
        "vocab_size": 512,
    }
    (tmp_path / "config.json").write_text(json.dumps(gpt2))
    stamped, whole = _both(TrainSpec(model=str(tmp_path), batch=2, seq_len=64), monkeypatch)
    assert stamped.stamp is not None
    assert stamped.stamp.why is None, stamped.stamp
    assert stamped.stamp.layers == 24
    _same(stamped, whole)


@pytest.mark.slow
def test_an_estimate_from_a_stamped_step_is_the_same_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = TrainSpec(
        model=_config(tmp_path / "llama"),
        batch=2,
        seq_len=64,
        precision="bf16",
        checkpointing=True,
        device="a100-80gb",
    )
    figures = []
    for switch in ("1", "0"):
        monkeypatch.setenv(stamp.SWITCH, switch)
        data = estimate_dict(estimate(spec))
        data.pop("seconds", None)
        figures.append(json.dumps(data, sort_keys=True))
    assert figures[0] == figures[1]


@pytest.mark.slow
def test_a_stamped_trace_is_kept_under_the_whole_traces_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(store.OFF, raising=False)
    monkeypatch.setenv(store.FOLDER, str(tmp_path / "traces"))
    spec = TrainSpec(model=_config(tmp_path / "llama"), batch=1, seq_len=32)
    monkeypatch.setenv(stamp.SWITCH, "1")
    stamped = trace_step(spec)
    assert stamped.stamp is not None
    assert stamped.stamp.why is None
    monkeypatch.setenv(stamp.SWITCH, "0")
    kept = trace_step(spec)  # NB: read back: the key does not depend on how it was made
    assert kept.store_key == stamped.store_key
    assert kept.stamp == stamped.stamp
    monkeypatch.setenv(store.OFF, "1")
    whole = trace_step(spec)
    assert whole.stamp == StampNote(None, Unstamped.OFF)
    assert whole.store_key == stamped.store_key
    _same(kept, whole)


def test_a_plain_module_is_traced_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stamp.SWITCH, "1")
    trace = trace_step(TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=4))
    assert trace.stamp == StampNote(None, Unstamped.NOT_A_STACK)


def test_a_copied_pass_is_traced_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stamp.SWITCH, "1")
    model = _config(tmp_path / "llama", num_hidden_layers=2)
    source = trace_step(TrainSpec(model=model, batch=1, seq_len=16))
    assert source.stamp == StampNote(None, Unstamped.FEW_LAYERS)
    copied = trace_step(
        TrainSpec(model=model, batch=1, seq_len=16, optimizer="sgd"), passes_from=source
    )
    assert copied.stamp == StampNote(None, Unstamped.COPIED_PASSES)


def test_stacks_that_are_not_stamped_say_why(tmp_path: Path) -> None:
    assert stack_layers(TrainSpec(model="bert-base-uncased")) is Unstamped.MODEL_TYPE
    assert stack_layers(TrainSpec(model="trainfit.models.zoo:emotion_mlp")) is (
        Unstamped.NOT_A_STACK
    )
    user = TrainSpec(model="gpt2", step_fn="trainfit.models.zoo:emotion_mlp")
    assert stack_layers(user) is Unstamped.USER_CODE
    mixed = _config(
        tmp_path / "qwen2",
        model_type="qwen2",
        architectures=["Qwen2ForCausalLM"],
        num_hidden_layers=24,
        use_sliding_window=True,
        sliding_window=64,
        max_window_layers=4,
    )
    assert stack_layers(TrainSpec(model=mixed)) is Unstamped.LAYERS_DIFFER
    assert stack_layers(TrainSpec(model="gpt2-medium")) == 24
    assert stack_layers(TrainSpec(model="gpt2")) is Unstamped.FEW_LAYERS


def test_stamping_is_on_unless_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stamp.SWITCH, raising=False)
    assert stamp.stamping()
    monkeypatch.setenv(stamp.SWITCH, "0")
    assert not stamp.stamping()


def test_a_step_of_a_few_layers_that_fails_leaves_the_whole_step_to_the_tracer(
    tmp_path: Path,
) -> None:
    spec = TrainSpec(model=_config(tmp_path / "llama"), batch=1, seq_len=16)

    def failing(layers: int) -> stamp.Traced:
        raise TraceError(f"no trace at {layers} layers")

    made, note = stamp.stamped(spec, failing)
    assert made is None
    assert note == StampNote(24, Unstamped.FEW_FAILED, "no trace at 2 layers", ())


def test_a_cost_entry_keeps_every_field_through_its_item() -> None:
    # NB: a field of OpCost left out of the item would come back as its default in every
    # stamped step (a recurrent call's gates decide its backward kernels)
    from types import SimpleNamespace

    from trainfit.trace.costs import OpCost, OpKind
    from trainfit.trace.stamp import _cost_entry, _streams
    from trainfit.training import Phase

    rnn = OpCost(OpKind.RNN, "fp32", 10, 20, 64, 3 * 192 * 192, True, 2, 3)
    plain = OpCost(OpKind.HOST, "bf16", 0, 0, 0, graph=True)
    entries = [(rnn, 0, Phase.BACKWARD, 0), (plain, 1, Phase.FORWARD, 0)]
    empty = SimpleNamespace(
        events=[], categories={}, reference_keys=frozenset(), workspaces=[], passes=[]
    )
    costs = _streams(empty, entries)[3]
    assert [_cost_entry(item) for item in costs] == entries


@pytest.mark.parametrize(
    ("pattern", "selects"),
    [
        ("model.layers.1*", True),
        ("*layers.?.*", True),
        ("model.layers.[0-9].mlp*", True),
        ("*.3.self_attn*", True),
        ("model.embed_tokens*", False),
        ("*mlp.fc1", False),
        ("model.layers.*", False),
        ("lm_head.weight", False),
    ],
)
def test_a_pattern_that_names_layers_by_index_is_traced_whole(
    pattern: str, selects: bool, tmp_path: Path
) -> None:
    spec = TrainSpec(model=_config(tmp_path / "llama"), freeze=(pattern,))
    layers = stack_layers(spec)
    assert (layers is Unstamped.SELECTS_LAYERS) is selects
    if not selects:
        assert layers == 24
    lora = TrainSpec(model=spec.model, lora=LoraSpec(rank=8, targets=(pattern,)))
    assert (stack_layers(lora) is Unstamped.SELECTS_LAYERS) is selects


@pytest.mark.slow
def test_a_step_freezing_some_layers_by_index_equals_the_whole_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NB: stamped from 2-5 layers, "model.layers.1*" froze layer 1 only, and the stamped step
    # trained layers 10-19, which the whole step freezes
    spec = TrainSpec(
        model=_config(tmp_path / "llama"), batch=2, seq_len=64, freeze=("model.layers.1*",)
    )
    stamped, whole = _both(spec, monkeypatch)
    assert stamped.stamp == StampNote(None, Unstamped.SELECTS_LAYERS)
    _same(stamped, whole)
