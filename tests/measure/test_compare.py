"""`trainfit.measure.compare`: the estimate and the measurement lined up with the error."""

from __future__ import annotations

import pytest

from tests.measure.fakes import FakeCuda, GiB
from tests.measure_models import CAPPED
from trainfit.estimator.step import estimate
from trainfit.measure.compare import compare
from trainfit.measure.steps import measure
from trainfit.spec import TrainSpec


@pytest.mark.slow
def test_compare_lines_up_estimate_and_measurement_with_the_error():
    spec = TrainSpec(**CAPPED)
    result = estimate(spec)
    m = measure(spec, steps=2, warmup=1, device="cpu")
    comparison = compare(result, m)
    row = comparison.row("device memory needed")
    assert row.estimated == result.device_memory_needed_bytes
    assert row.measured == m.device_needed_bytes
    if m.device_needed_bytes:
        assert row.error == pytest.approx(row.estimated / row.measured - 1)
    assert comparison.row("step time (loop)").measured == m.loop_step_seconds
    with pytest.raises(KeyError):
        comparison.row("peak allocated")  # no allocator counters on the CPU


def test_compare_on_a_gpu_adds_allocator_rows_and_component_totals():
    spec = TrainSpec(**{**CAPPED, "device": "h100"})
    result = estimate(spec)
    m = measure(spec, steps=2, warmup=1, backend=FakeCuda())
    totals = {"parameters": 1, "gradients": 2, "optimizer_state": 3, "activations": 4}
    comparison = compare(result, m, totals)
    quantities = [r.quantity for r in comparison.rows]
    assert quantities[:3] == ["device memory needed", "peak allocated", "peak reserved"]
    assert comparison.row("optimizer state").estimated == 3
    assert comparison.row("activations kept by the forward").measured == m.activation_bytes
    assert comparison.row("peak reserved").error == pytest.approx(
        result.peak_reserved_bytes / (2 * GiB) - 1
    )
