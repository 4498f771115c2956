"""A plan's step times: the data-parallel rows' throughput is all the GPUs' together."""

from __future__ import annotations

import pytest

from trainfit.plan.search import plan
from trainfit.plan.times import over_gpus
from trainfit.spec import TrainSpec


def test_data_parallel_throughput_counts_every_gpu() -> None:
    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp", device="h100")
    d = plan(spec, 64, ("h100",), ladder=False).devices[0]
    by_gpus = dict(d.step_times)
    assert set(by_gpus) == {2, 4, 8, 16}
    for n, step in by_gpus.items():
        per_gpu = step.micro_batch * step.grad_accum
        assert per_gpu * n == 64
        assert step.samples_per_second == pytest.approx(n * per_gpu / step.seconds)
    # NB: each GPU's share takes no longer than the whole batch on one GPU, so more GPUs never
    # lower the throughput (the column showed one GPU's, which fell as the GPUs grew)
    rates = [d.step_time.samples_per_second, *(by_gpus[n].samples_per_second for n in (2, 4))]
    assert rates == sorted(rates)


def test_over_gpus_scales_samples_and_tokens_only() -> None:
    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp", device="h100")
    one = plan(spec, 8, ("h100",), ladder=False).devices[0].step_time
    assert one is not None
    four = over_gpus(one, 4)
    assert four.seconds == one.seconds and four.micro_batch == one.micro_batch
    assert four.samples_per_second == pytest.approx(4 * one.samples_per_second)
    assert four.tokens_per_second == (
        None if one.tokens_per_second is None else pytest.approx(4 * one.tokens_per_second)
    )
