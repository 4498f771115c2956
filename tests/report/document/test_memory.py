"""`trainfit.report.document.memory`: each device's breakdown and memory curve, from the plan."""

from __future__ import annotations

from tests.report.document.wide import GIB, _device
from trainfit.plan.options import Plan, Verdict
from trainfit.plan.words import note_text


def test_the_plan_fits_one_device_and_not_another(planned: Plan) -> None:
    assert _device(planned, "rtx-4060").setting is not None
    assert _device(planned, "tiny-gpu").verdict is Verdict.NO
    assert set(planned.scalings) == {"rtx-4060", "h100"}  # kept for the report, no new trace


def test_breakdown_sums_to_the_plans_memory_and_the_curve_meets_it(report, planned) -> None:
    stage = report.models[0].stages[0]
    memory = {m.device: m for m in stage.memory}
    for name in ("rtx-4060", "h100"):
        d, m = _device(planned, name), memory[name]
        assert m.micro_batch == d.setting.micro_batch
        assert sum(v for _, v in m.breakdown) == d.setting.needed_bytes
        points = {p.micro_batch: p for p in m.curve}
        assert points[m.micro_batch].needed_bytes == d.setting.needed_bytes
        # NB: not monotonic point by point (the allocator's segments), but growing
        assert m.curve[0].needed_bytes < d.setting.needed_bytes < m.curve[-1].needed_bytes
        largest = d.max_micro_batch
        assert 32 < largest < 1 << 16  # found by the plan's search, not its limit
        assert points[largest].fits and not points[largest + 1].fits
    tiny = memory["tiny-gpu"]
    assert not tiny.breakdown and not tiny.curve and tiny.limit_bytes == GIB
    assert tiny.note == note_text(_device(planned, "tiny-gpu"))
