"""Latency tells the build and each batch as it starts (the progress protocol)."""

from __future__ import annotations

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
