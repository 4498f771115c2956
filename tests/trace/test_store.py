"""Traced steps kept on disk: read back equal, keyed by all they depend on, never for user code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainfit import TrainSpec
from trainfit.trace import step as step_module
from trainfit.trace import store
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

TINY_LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
}


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The store switched on (tests run with it off), in a folder of the test's own."""
    monkeypatch.delenv(store.OFF, raising=False)
    folder = tmp_path / "traces"
    monkeypatch.setenv(store.FOLDER, str(folder))
    return folder


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    return folder


def _key(spec: TrainSpec, target: Target | None = None) -> str | None:
    return store.trace_key(spec, target or Target.cuda(), 2, True, False, None)


def test_a_kept_trace_is_read_back_equal_without_tracing(
    kept: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = TrainSpec(model=str(model_dir), batch=2, seq_len=32, precision="bf16")
    made = trace_step(spec)
    assert made.store_key == _key(spec)
    assert len(list(kept.glob("*.pickle"))) == 1

    def untraced(*args: object, **kwargs: object) -> None:
        raise AssertionError("traced again")

    monkeypatch.setattr(step_module, "_trace", untraced)
    again = trace_step(spec)
    assert again == made
    assert again is not made
    assert again.costs == made.costs
    assert again.store_key == made.store_key


def test_a_file_that_does_not_read_back_is_traced_again(kept: Path, model_dir: Path) -> None:
    spec = TrainSpec(model=str(model_dir), batch=1, seq_len=16)
    made = trace_step(spec)
    (path,) = kept.glob("*.pickle")
    path.write_bytes(path.read_bytes()[:100])
    assert store.load(made.store_key or "") is None
    assert trace_step(spec) == made
    assert store.load(made.store_key or "") == made


def test_switched_off_nothing_is_kept(
    kept: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(store.OFF, "1")
    assert not store.enabled()
    trace_step(TrainSpec(model=str(model_dir), batch=1, seq_len=16))
    assert not kept.exists()


def test_the_key_follows_the_spec_the_target_and_the_config(model_dir: Path) -> None:
    spec = TrainSpec(model=str(model_dir), batch=1, seq_len=16)
    key = _key(spec)
    assert key is not None and str(model_dir) in key
    assert _key(TrainSpec(model=str(model_dir), batch=2, seq_len=16)) != key
    assert _key(spec, Target.cuda((8, 0))) != key
    assert store.trace_key(spec, Target.cuda(), 2, True, True, key) != key
    assert store.trace_key(spec, Target.cuda(), 1, True, False, None) != key
    (model_dir / "config.json").write_text(json.dumps({**TINY_LLAMA, "num_hidden_layers": 3}))
    assert _key(spec) != key


def test_user_code_hub_ids_and_unkeyed_sources_are_not_kept(model_dir: Path) -> None:
    assert _key(TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=4)) is None
    assert _key(TrainSpec(model="someone/some-model")) is None
    step_fn = TrainSpec(model=str(model_dir), step_fn="trainfit.models.zoo:emotion_mlp")
    assert _key(step_fn) is None
    spec = TrainSpec(model="gpt2")
    assert store.trace_key(spec, Target.cuda(), 2, True, True, None) is None
    assert _key(spec) is not None and "catalog" in (_key(spec) or "")


def test_a_fact_is_worked_out_once_and_read_back(kept: Path, model_dir: Path) -> None:
    spec = TrainSpec(model=str(model_dir), batch=1, seq_len=16)
    calls: list[int] = []

    def work_out() -> tuple[int, int]:
        calls.append(1)
        return (7, 5)

    assert store.remembered("counts", spec, work_out) == (7, 5)
    assert store.remembered("counts", spec, work_out) == (7, 5)
    assert calls == [1]
    assert store.remembered("other", spec, lambda: "x") == "x"  # NB: its own key
    user = TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=4)
    store.remembered("counts", user, work_out)
    store.remembered("counts", user, work_out)
    assert calls == [1, 1, 1]  # NB: user code is never kept
