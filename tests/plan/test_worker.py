"""The ladder's worker starts only when its first step is not kept on disk."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from trainfit import TrainSpec
from trainfit.hardware.catalog import get_device
from trainfit.plan.worker import worth_starting
from trainfit.trace import store
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 256,
}


def test_a_worker_is_started_unless_its_first_step_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    device = get_device("h100")
    spec = TrainSpec(model=str(folder), seq_len=16, precision="bf16")
    steps = [(spec, 2), (dataclasses.replace(spec, checkpointing=True), 2)]
    assert worth_starting(steps, device)  # NB: the store is off in tests
    monkeypatch.delenv(store.OFF)
    monkeypatch.setenv(store.FOLDER, str(tmp_path / "traces"))
    assert worth_starting(steps, device)
    assert not worth_starting([], device)
    first = TrainSpec(model=str(folder), seq_len=16, precision="bf16", batch=2, device="h100")
    trace_step(first, target=Target.of(device))
    assert not worth_starting(steps, device)
