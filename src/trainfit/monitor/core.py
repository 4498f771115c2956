"""The training monitor: a context manager around the user's own loop.

    with Monitor(model=model, optimizer=optimizer, spec=spec, csv="run.csv") as mon:
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            mon.step(loss=loss)

`step()` records a `Sample` every `every` optimizer steps: the allocator's allocated, reserved
and peak (reset at each record), the device's memory in use, and GPU utilisation, power and
temperature read by a background thread every `interval_s` (NVML). An out-of-memory error
inside the block becomes an `OomReport` on `mon.oom` (where in the step, how full, the next
rung of the low-memory ladder) and then propagates unchanged.

Known limitations: step times are wall-clock without device synchronisation (queued kernels
count in a later step); the CPU and MPS peaks are polled, so a short spike between polls is
missed; the monitor follows one device (one rank under torchrun: give each rank its own
files); the phase hooks need `model=` (without it an OOM reports phase data/other).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TextIO

import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.measure.backend import is_out_of_memory
from trainfit.monitor.notes import (
    CsvColumnsDropped,
    MonitorNote,
    OomMemoryUnread,
    OomReportFailed,
    SamplerStopped,
    SinkCloseFailed,
)
from trainfit.monitor.oom import (
    OomReport,
    build_report,
    next_rung_for_spec,
    next_rung_observed,
    observe,
)
from trainfit.monitor.phase import PhaseTracker
from trainfit.monitor.sample import Sample
from trainfit.monitor.sinks import ConsoleSink, CsvSink, Sink, TensorBoardSink
from trainfit.monitor.sources import (
    GpuReading,
    GpuSource,
    MemoryReading,
    MemorySource,
    gpu_source,
    memory_source,
)
from trainfit.spec import TrainSpec

HISTORY = 100_000
"""Samples kept in memory (`Monitor.samples`); older ones stay in the files only."""


def _number(name: str, value: Any) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise SpecError(
                [f"monitor value {name!r} is a tensor of {value.numel()} elements: give a scalar"]
            )
        return float(value.detach().float().item())  # NB: synchronises the device
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise SpecError(
            [f"monitor value {name!r} is {value!r}: give a number or a one-element tensor"]
        ) from exc


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class Monitor:
    """Samples memory and GPU counters per optimizer step; explains an out-of-memory error."""

    def __init__(
        self,
        model: nn.Module | None = None,
        spec: TrainSpec | None = None,
        device: str | torch.device | None = None,
        every: int = 1,
        interval_s: float = 1.0,
        csv: str | None = None,
        tensorboard: str | None = None,
        console: bool | TextIO = True,
        *,
        optimizer: torch.optim.Optimizer | None = None,
        memory: MemorySource | None = None,
        gpu: GpuSource | None = None,
    ) -> None:
        """
        Args:
            model: the model being trained; with it, an OOM says where in the step it happened
                (hooks on every module, removed on exit) and the device defaults to its own.
            spec: the run as a TrainSpec; with it, the next rung of the ladder comes with
                predicted memory for `spec.device`.
            device: the torch device to follow (default: the model's, else CUDA, MPS, CPU).
            every: record every N optimizer steps (the peak covers all N).
            interval_s: seconds between the sampler thread's NVML readings.
            csv: path of a CSV file (replaced) to write a row per record.
            tensorboard: a TensorBoard log directory.
            console: True writes a line per record to stderr; a text stream writes there;
                False writes nothing.
            optimizer: the optimizer (or optimizers, via `attach`): its step is the
                "optimizer" phase.
            memory: an allocator source (tests pass a fake; default from `device`).
            gpu: a device-counter source (tests pass a fake; default NVML on CUDA).
        """
        problems = []
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            problems.append(f"every must be a positive integer, got {every!r}")
        if not (isinstance(interval_s, (int, float)) and math.isfinite(interval_s)) or not (
            interval_s > 0
        ):
            problems.append(f"interval_s must be a positive number of seconds, got {interval_s!r}")
        if spec is not None and not isinstance(spec, TrainSpec):
            problems.append(f"spec must be a trainfit.TrainSpec, got {type(spec).__name__}")
        if problems:
            raise SpecError(problems)
        self.model = model
        self.spec = spec
        self.device = device
        self.every = every
        self.interval_s = float(interval_s)
        self.csv = csv
        self.tensorboard = tensorboard
        self.console = console
        self.optimizer = optimizer
        self.memory = memory
        self.gpu = gpu
        self.tracker = PhaseTracker()
        self.notes: list[MonitorNote] = []
        """Things the user should know (NVML missing, a CSV column dropped ...)."""
        self.oom: OomReport | None = None
        """The out-of-memory report, once one happened."""
        self._samples: deque[Sample] = deque(maxlen=HISTORY)
        self._sinks: list[Sink] = []
        self._steps = 0
        self._recorded_step = 0
        self._recorded_at = 0.0
        self._gpu_readings: list[GpuReading] = []
        self._last_gpu = GpuReading()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._noted = 0
        self._gpu_noted = 0
        self._reported: set[int] = set()
        self._running = False

    # -- life cycle --------------------------------------------------------------------------

    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            if exc is not None:
                self.report_exception(exc)
        finally:
            self.stop()
        return False  # NB: never swallow: the exception propagates unchanged

    def start(self) -> Monitor:
        """Open the sinks, attach the hooks, start the sampler thread."""
        if self._running:
            return self
        if self.device is None and self.model is not None:
            first = next(self.model.parameters(), None)
            if first is not None:
                self.device = first.device
        if self.memory is None:
            self.memory = memory_source(self.device)
        try:
            self._open_sinks()
        except BaseException:
            self._close_sinks()
            raise
        if self.gpu is None:
            self.gpu = gpu_source(self.memory)
        self.attach(self.model, self.optimizer)
        self.memory.reset_peak()
        self._recorded_at = time.perf_counter()
        self._running = True
        self._poll()
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample_loop, name="trainfit-monitor")
        self._thread.daemon = True
        self._thread.start()
        self._emit_notes()
        return self

    def attach(
        self, model: nn.Module | None = None, optimizer: torch.optim.Optimizer | None = None
    ) -> None:
        """Hook a model and/or an optimizer (adapters call this once the trainer built them)."""
        if model is not None:
            self.model = model
            self.tracker.attach_model(model)
        if optimizer is not None:
            self.optimizer = self.optimizer or optimizer
            self.tracker.attach_optimizer(optimizer)

    def stop(self) -> None:
        """Stop the sampler thread, remove the hooks, close the files. Safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            self._thread = None
        self.tracker.detach()
        if self.gpu is not None:
            self.gpu.close()
        self._emit_notes()
        self._close_sinks()
        self._running = False

    def _open_sinks(self) -> None:
        if self.console is True:
            self._sinks.append(ConsoleSink(sys.stderr))
        elif self.console is not False and self.console is not None:
            self._sinks.append(ConsoleSink(self.console))
        if self.csv is not None:
            self._sinks.append(CsvSink(self.csv))
        if self.tensorboard is not None:
            self._sinks.append(TensorBoardSink(self.tensorboard))

    def _close_sinks(self) -> None:
        for sink in self._sinks:
            try:
                sink.close()
            except Exception as exc:  # NB: closing one file must not keep the others open
                self.notes.append(SinkCloseFailed(sink=type(sink).__name__, error=str(exc)))
        self._sinks.clear()

    # -- the sampler thread ------------------------------------------------------------------

    def _poll(self) -> None:
        assert self.gpu is not None and self.memory is not None
        reading = self.gpu.read()
        self.memory.poll()
        with self._lock:
            self._gpu_readings.append(reading)
            self._last_gpu = reading

    def _sample_loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._poll()
            except Exception as exc:  # NB: a failing counter must not stop the training
                self.notes.append(SamplerStopped(error=str(exc)))
                return

    # -- steps ---------------------------------------------------------------------------------

    @property
    def steps(self) -> int:
        """Optimizer steps seen."""
        return self._steps

    @property
    def samples(self) -> tuple[Sample, ...]:
        """The records so far (the last HISTORY)."""
        return tuple(self._samples)

    def step(self, loss: Any = None, **scalars: Any) -> Sample | None:
        """Call once per optimizer step; returns the Sample when this step is recorded."""
        sample = self.advance(loss, scalars)
        if sample is not None:
            self.record(sample)
        return sample

    def advance(
        self, loss: Any = None, scalars: Mapping[str, Any] | None = None, step: int | None = None
    ) -> Sample | None:
        """Count an optimizer step (number `step` if the trainer says) and take its Sample if
        due, without writing it (adapters that learn the loss later use this, then `record`)."""
        self._steps = self._steps + 1 if step is None else step
        self.tracker.step_done()
        if self._steps % self.every:
            return None
        return self._take(loss, scalars or {})

    def _take(self, loss: Any, scalars: Mapping[str, Any]) -> Sample:
        assert self.memory is not None
        now = time.perf_counter()
        done = max(1, self._steps - self._recorded_step)
        seconds = (now - self._recorded_at) / done
        with self._lock:
            readings, self._gpu_readings = self._gpu_readings, []
            last = self._last_gpu
        memory = self.memory.read(device_used=last.memory_used_bytes is None)
        self.memory.reset_peak()
        self._recorded_step, self._recorded_at = self._steps, now
        used = [r.memory_used_bytes for r in readings if r.memory_used_bytes is not None]
        util = [r.utilization_percent for r in readings if r.utilization_percent is not None]
        power = [r.power_watts for r in readings if r.power_watts is not None]
        return Sample(
            step=self._steps,
            time=time.time(),
            step_seconds=seconds,
            allocated_bytes=memory.allocated_bytes,
            reserved_bytes=memory.reserved_bytes,
            peak_allocated_bytes=memory.peak_allocated_bytes,
            device_used_bytes=max(used)
            if used
            else last.memory_used_bytes
            if last.memory_used_bytes is not None
            else memory.device_used_bytes,
            utilization_percent=_mean(util) if util else last.utilization_percent,
            power_watts=_mean(power) if power else last.power_watts,
            temperature_c=last.temperature_c,
            loss=None if loss is None else _number("loss", loss),
            scalars={name: _number(name, value) for name, value in scalars.items()},
        )

    def record(self, sample: Sample) -> None:
        """Keep a Sample and write it to every sink."""
        self._samples.append(sample)
        for sink in self._sinks:
            sink.write(sample)
            dropped = getattr(sink, "dropped", None)
            if dropped:
                self.notes.append(CsvColumnsDropped(columns=tuple(sorted(dropped))))
                dropped.clear()
        self._emit_notes()

    def _emit_notes(self) -> None:
        if self.gpu is not None:
            self.notes.extend(self.gpu.notes[self._gpu_noted :])
            self._gpu_noted = len(self.gpu.notes)
        new, self._noted = self.notes[self._noted :], len(self.notes)
        for note in new:
            for sink in self._sinks:
                sink.note(note)

    # -- out of memory -----------------------------------------------------------------------

    def report_exception(self, exc: BaseException) -> OomReport | None:
        """If `exc` is out-of-memory: build the OomReport, keep it on `oom` and write it.

        Never raises (a failing report is a note); the caller re-raises `exc`.
        """
        if not is_out_of_memory(exc) or id(exc) in self._reported:
            return None
        self._reported.add(id(exc))
        try:
            report = self._build(exc)
        except Exception as failure:  # NB: the OOM is what the user must see, not this
            self.notes.append(OomReportFailed(error=str(failure)))
            self._emit_notes()
            return None
        self.oom = report
        for sink in self._sinks:
            sink.write_oom(report)
        return report

    def _build(self, exc: BaseException) -> OomReport:
        phase, module = self.tracker.phase, self.tracker.module
        memory = MemoryReading(
            allocated_bytes=None, reserved_bytes=None, peak_allocated_bytes=None, total_bytes=None
        )
        if self.memory is not None:
            try:
                memory = self.memory.read()
            except Exception as failure:
                self.notes.append(OomMemoryUnread(error=str(failure)))
        if self.spec is not None:
            rung = next_rung_for_spec(self.spec)
        else:
            seen = observe(
                self.model,
                self.optimizer,
                autocast=self.tracker.autocast_seen,
                recompute=self.tracker.recompute_seen,
                micro_batch=self.tracker.micro_batch,
                accumulation=self._accumulation(),
            )
            rung = next_rung_observed(seen)
        return build_report(
            step=self._steps + 1,
            phase=phase,
            module=module,
            module_type=self.tracker.module_type(module),
            allocated_bytes=memory.allocated_bytes,
            reserved_bytes=memory.reserved_bytes,
            peak_allocated_bytes=memory.peak_allocated_bytes,
            total_bytes=memory.total_bytes,
            exc=exc,
            next_rung=rung,
        )

    def _accumulation(self) -> int | None:
        return self.tracker.last_forwards or None
