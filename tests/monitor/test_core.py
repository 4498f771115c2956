"""`trainfit.monitor.core`: the monitor's samples, arguments, notes and clean stop (CPU)."""

from __future__ import annotations

import io
import time

import pytest

from tests.monitor.support import GiB, Net, fake_memory, quiet, train
from trainfit.errors import SpecError
from trainfit.monitor import FakeGpu, GpuReading, Monitor
from trainfit.monitor.notes import CounterOff, SamplerStopped
from trainfit.monitor.oom_words import monitor_note_text


def test_samples_from_fakes() -> None:
    memory = fake_memory()
    with quiet(memory=memory) as mon:
        train(Net(), mon, steps=3)
    first, _, third = mon.samples
    assert [s.step for s in mon.samples] == [1, 2, 3]
    assert first.allocated_bytes == GiB
    assert first.reserved_bytes == 2 * GiB
    assert first.peak_allocated_bytes == GiB + GiB // 2
    assert first.device_used_bytes == 3 * GiB
    assert (first.utilization_percent, first.power_watts, first.temperature_c) == (50, 300, 60)
    assert third.loss is not None and third.scalars == {"lr": 0.1}
    assert memory.resets == 4  # NB: once at the start, then at every record


def test_every_records_every_nth_step() -> None:
    with quiet(every=2) as mon:
        train(Net(), mon, steps=5)
    assert [s.step for s in mon.samples] == [2, 4]


def test_bad_arguments_are_listed() -> None:
    with pytest.raises(SpecError, match=r"every must be a positive integer, got 0; interval_s"):
        Monitor(every=0, interval_s=-1)


def test_a_failing_sampler_is_a_note_and_the_run_goes_on() -> None:
    class Failing(FakeGpu):
        def read(self) -> GpuReading:
            if self._next:  # NB: the first reading, in __enter__, succeeds; the thread's fails
                raise RuntimeError("counter gone")
            return super().read()

    with quiet(gpu=Failing(readings=[GpuReading()]), interval_s=0.01) as mon:
        deadline = time.monotonic() + 5
        while not mon.notes and time.monotonic() < deadline:
            time.sleep(0.01)
        mon.step(loss=1.0)
    assert mon.notes == [SamplerStopped(error="counter gone")]
    assert monitor_note_text(mon.notes[0]) == "the sampler thread stopped: counter gone"


def test_gpu_notes_reach_the_console() -> None:
    stream = io.StringIO()
    note = CounterOff(counter="power", error="x")
    with quiet(gpu=FakeGpu(readings=[GpuReading()], notes=[note]), console=stream) as mon:
        pass
    assert stream.getvalue() == "trainfit: note: NVML power unavailable (x)\n"
    assert mon.notes == [note]


def test_keyboard_interrupt_stops_cleanly(tmp_path) -> None:
    path = tmp_path / "run.csv"
    model = Net()
    with pytest.raises(KeyboardInterrupt), quiet(model=model, csv=str(path)) as mon:
        train(model, mon, steps=2)
        raise KeyboardInterrupt
    assert mon._thread is None
    assert len(path.read_text().splitlines()) == 3  # NB: header and both rows kept
    assert all(not m._forward_pre_hooks for m in model.modules())
