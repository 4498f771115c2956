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


def _searched(*names: str) -> dict[int, tuple[object, ...]]:
    spec = TrainSpec(model="gpt2", seq_len=16)
    return {i: (spec, 8, get_device(n), 0.1, None, None, None, None) for i, n in enumerate(names)}


def test_searches_outside_the_largest_kernel_family_go_to_the_worker() -> None:
    from trainfit.plan import beyond

    searched = _searched("h100", "a100-40gb", "l4", "t4", "rtx-4090")
    assert sorted(beyond._elsewhere(searched)) == [0, 3]  # NB: sm80 and sm89 are one family
    assert beyond._elsewhere(_searched("a100-40gb", "l4")) == {}
    assert sorted(beyond._elsewhere(_searched("t4", "h100"))) == [1]  # NB: a tie: the first


@pytest.mark.slow
def test_a_plan_with_multi_gpu_searches_in_the_worker_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainfit.plan import search
    from trainfit.plan.search import plan
    from trainfit.plan.words import plan_dict
    from trainfit.plan.worker import LadderWorker

    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    spec = TrainSpec(model=str(folder), seq_len=16)
    devices = ("a100-40gb", "l4", "t4")
    here = plan(spec, 8, devices, jobs=1, multi_gpu=True)
    asked = []
    real = LadderWorker.search

    def counted(self: LadderWorker, arguments: tuple[object, ...]) -> object:
        asked.append(arguments[2].name)  # type: ignore[attr-defined]
        return real(self, arguments)

    monkeypatch.setattr(search, "WORKER_PARAMETERS", 0)  # NB: a worker for the tiny model
    monkeypatch.setattr(LadderWorker, "search", counted)
    there = plan(spec, 8, devices, jobs=2, multi_gpu=True)
    assert asked == ["t4"]
    assert plan_dict(there) == plan_dict(here)
    assert all(d.distributed is not None for d in there.devices)


def test_a_search_that_fails_in_the_worker_is_made_here(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from trainfit.plan.beyond import with_distributed
    from trainfit.plan.search import plan
    from trainfit.plan.words import plan_dict

    class Failing:
        def __init__(self) -> None:
            self.asked: list[str] = []

        def search(self, arguments: tuple[object, ...]) -> Future[object]:
            self.asked.append(arguments[2].name)  # type: ignore[attr-defined]
            future: Future[object] = Future()
            future.set_exception(RuntimeError("the worker died"))
            return future

    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    result = plan(TrainSpec(model=str(folder), seq_len=16), 8, ("t4", "a100-40gb", "l4"))
    failing = Failing()
    args = (result, None, 0.1, None, None, None, None)
    there = with_distributed(*args, every=True, worker=failing)  # type: ignore[arg-type]
    assert failing.asked == ["t4"]
    assert plan_dict(there) == plan_dict(with_distributed(*args, every=True))
    assert all(d.distributed is not None for d in there.devices)
