"""Latency tells the build and each batch as it starts (the progress protocol), and times a
live module's copy."""

from __future__ import annotations

import torch
from torch import nn

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
