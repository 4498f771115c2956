"""What `trainfit measure` prints of a run: the loop's step time as the headline, each step
alone beside it."""

from __future__ import annotations

from rich.console import Console

from trainfit.hardware.catalog import DeviceKind
from trainfit.measure.steps import Measured
from trainfit.measure.window import LoopWindow
from trainfit.report.measure import loop_line, measured_renderable


def _measured(loop: LoopWindow | None, interrupted: bool = False) -> Measured:
    return Measured(
        device_name="Test CPU", kind=DeviceKind.CPU, warmup=1, steps=3, interrupted=interrupted,
        micro_batch=4, grad_accum=2, tokens_per_sample=None, peak_allocated_bytes=None,
        peak_reserved_bytes=None, peak_used_bytes=1 << 20, device_needed_bytes=1 << 20,
        used_method="resident set", baseline_used_bytes=0, total_memory_bytes=None,
        free_at_start_bytes=None, free_at_end_bytes=None, parameter_bytes=1, gradient_bytes=1,
        optimizer_state_bytes=2, activation_bytes=None, phases=(),
        step_seconds=(0.012, 0.010, 0.011), loop=loop,
    )  # fmt: skip


def _text(m: Measured) -> str:
    console = Console(record=True, width=200)
    console.print(measured_renderable(m, None))
    return console.export_text()


def test_the_headline_is_the_loop_and_each_step_alone_is_beside_it():
    text = _text(_measured(LoopWindow(steps=3, seconds=0.024)))
    assert "1 warm-up + 3 timed steps, then 3 back to back\n" in text
    assert "step 8.0 ms in a loop (3 steps back to back), 1000.0 samples/s\n" in text
    assert "each step alone, synchronised: 11.0 ms median (10.0 to 12.0)\n" in text


def test_without_a_window_only_the_synced_steps_are_shown():
    text = _text(_measured(None, interrupted=True))
    assert "1 warm-up + 3 timed steps (interrupted)\n" in text
    assert "in a loop" not in text and "samples/s" not in text
    assert "each step alone, synchronised: 11.0 ms median" in text


def test_the_loop_window_is_one_line_when_it_completes():
    assert loop_line(LoopWindow(steps=10, seconds=0.25)) == (
        "10 steps back to back: 250 ms, 25 ms per step"
    )
