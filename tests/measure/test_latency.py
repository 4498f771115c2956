"""`trainfit.measure.latency`: percentiles per batch, bad input, the build and each batch told
as it starts (the progress protocol), a live module's copy timed."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.measure_models import CAPPED
from trainfit.errors import MeasureError
from trainfit.measure.latency import measure_latency
from trainfit.progress import Activity, Part, reporting
from trainfit.spec import TrainSpec


def test_the_build_and_each_batch_are_told() -> None:
    spec = TrainSpec(model="tests.measure_models:capped_mlp", inputs=("x=B,16:float32",),
                     device="cpu", batch=1)  # fmt: skip
    told = []
    with reporting(told.append):
        measure_latency(spec, batches=(4, 1), warmup=1, runs=2, device="cpu")
    mine = [(e.name, e.batch) for e in told if e.part is Part.MEASURE]
    assert mine == [(Activity.BUILD.value, None), (Activity.LATENCY.value, 1),
                    (Activity.LATENCY.value, 4)]  # fmt: skip


def test_a_live_module_s_forward_is_timed_on_a_copy() -> None:

    net = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 3))
    table = measure_latency(
        model=net, sample=torch.randn(4, 8), batches=(1, 4), warmup=1, runs=2, device="cpu"
    )
    assert [(row.batch, row.runs) for row in table.rows] == [(1, 2), (4, 2)]
    assert net.training  # NB: the copy was put in eval mode, not the module


def test_latency_percentiles_per_batch():
    table = measure_latency(TrainSpec(**CAPPED), batches=(8, 1), warmup=2, runs=20, device="cpu")
    assert [r.batch for r in table.rows] == [1, 8]
    for row in table.rows:
        assert row.runs == 20 and len(row.seconds) == 20
        assert min(row.seconds) <= row.p50 <= row.p95 <= row.p99 <= max(row.seconds)
        assert row.samples_per_second == pytest.approx(row.batch / row.p50)
    data = table.to_dict()
    assert data["rows"][1]["p99_ms"] == pytest.approx(table.rows[1].p99 * 1e3)


def test_latency_bad_input():
    with pytest.raises(
        MeasureError,
        match=r"batch 0 is not a positive number; --runs must be "
        r"at least 2 for percentiles, got 1",
    ):
        measure_latency(TrainSpec(**CAPPED), batches=(1, 0), runs=1, device="cpu")
