"""The largest-micro-batch search tells each attempt as it starts (the progress protocol), and
searches a live module's copy with its weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainfit.errors import SpecError
from trainfit.measure.max_batch import Attempt, find_max_batch
from trainfit.progress import Activity, Part, reporting
from trainfit.spec import TrainSpec


def _probe(largest: int):
    def probe(micro: int, eval_batch: int | None) -> Attempt:
        fits = micro <= largest
        return Attempt(micro_batch=micro, eval_batch=eval_batch, fits=fits, eval_fits=None,
                       failed_phase=None if fits else "backward", failure=None,
                       peak_reserved_bytes=None, peak_used_bytes=None,
                       left_allocated_bytes=None, seconds=0.0)  # fmt: skip

    return probe


def test_each_attempt_is_told_with_its_micro_batch() -> None:
    spec = TrainSpec(model="tests.measure_models:capped_mlp", inputs=("x=B,16:float32",),
                     device="cpu", batch=1)  # fmt: skip
    told = []
    with reporting(told.append):
        found = find_max_batch(spec, device="cpu", probe=_probe(5), limit=64, evaluate=False)
    tried = [e.batch for e in told if e.part is Part.MEASURE]
    assert {e.name for e in told} == {Activity.ATTEMPT.value}
    assert tried == [a.micro_batch for a in found.attempts] and found.micro_batch == 5


def test_a_live_module_is_searched_on_a_copy_with_its_weights() -> None:

    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    weight = net[0].weight.detach().clone()
    seen: list[nn.Module] = []

    def step(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        seen.append(model)
        return F.cross_entropy(model(batch[0]), batch[1])

    sample = (torch.randn(4, 8), torch.randint(0, 3, (4,)))
    found = find_max_batch(
        model=net, sample=sample, step_fn=step, device="cpu", limit=8, steps=1, evaluate=False
    )
    assert found.micro_batch == 8 and found.first_failing is None
    trained = seen[0]
    assert trained is not net and trained[0].weight.device.type == "cpu"
    assert not torch.equal(trained[0].weight, weight)  # NB: the copy took optimizer steps...
    assert torch.equal(net[0].weight, weight) and net[0].weight.grad is None  # NB: ...not net


def test_a_live_module_needs_its_sample_and_a_spec_is_a_trainspec() -> None:

    with pytest.raises(SpecError, match=r"^model is a live Linear: give its batch too, e.g. "
                       r"find_max_batch\(model=module"):  # fmt: skip
        find_max_batch(model=nn.Linear(4, 2), device="cpu")
    with pytest.raises(SpecError, match=r"^model is a live Linear: give its batch too"):
        find_max_batch(nn.Linear(4, 2), device="cpu")  # type: ignore[arg-type]  # NB: the model
    with pytest.raises(SpecError, match=r"^find_max_batch: spec must be a TrainSpec, got str"):
        find_max_batch("gpt2", device="cpu")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="give either a TrainSpec or keyword arguments"):
        find_max_batch(TrainSpec(model="gpt2"), sample=torch.randn(2, 4))
