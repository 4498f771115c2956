"""The CPU runner: real steps, RSS high-water marks per phase, the allocator peak."""

from __future__ import annotations

import sys

import pytest

from trainfit import TrainSpec
from trainfit.measure.cpu import measure_cpu
from trainfit.measure.rss import current_rss_bytes
from trainfit.training import Phase

SPEC = TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=16, device="cpu")


@pytest.mark.slow
def test_rss_is_measured_per_phase() -> None:
    m = measure_cpu(SPEC, steps=2)
    assert m.steps == 2 and len(m.step_seconds) == 2
    # build, then forward/backward/optimizer of each iteration, then the gap between them
    assert [p.phase for p in m.phase_peaks[:2]] == [Phase.SETUP, Phase.SETUP]
    assert {p.phase for p in m.phase_peaks} == set(Phase)
    assert m.peak_rss_increase_bytes == max(p.rss_increase_bytes for p in m.phase_peaks)
    assert m.parameter_bytes > 4 * 200_000
    assert m.peak_allocated_bytes is None
    if sys.platform.startswith("linux"):
        assert m.rss_method == "VmHWM reset per phase"
        assert m.baseline_rss_bytes > 0


def test_allocator_peak_from_the_profiler() -> None:
    m = measure_cpu(SPEC, steps=1, allocations=True)
    # parameters, gradients and two AdamW moments at least
    assert m.peak_allocated_bytes is not None
    assert m.peak_allocated_bytes >= 4 * m.parameter_bytes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_current_rss_is_read() -> None:
    rss = current_rss_bytes()
    assert rss is not None and rss > 10 << 20
