"""The largest-micro-batch search tells each attempt as it starts (the progress protocol)."""

from __future__ import annotations

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
