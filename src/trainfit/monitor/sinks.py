"""Where the monitor writes: the console, a CSV file, TensorBoard.

Every sink writes as it goes and flushes, so a run that dies keeps what was recorded.
"""

from __future__ import annotations

import csv
import os
from dataclasses import fields
from typing import Any, Protocol, TextIO

from trainfit.errors import TrainfitError
from trainfit.hardware.units import GIB, gib
from trainfit.monitor.notes import MonitorNote
from trainfit.monitor.oom import OomReport
from trainfit.monitor.oom_words import monitor_note_text, oom_text
from trainfit.monitor.sample import Sample


class Sink(Protocol):
    def write(self, sample: Sample) -> None: ...

    def write_oom(self, report: OomReport) -> None: ...

    def note(self, note: MonitorNote) -> None: ...

    def close(self) -> None: ...


def console_line(sample: Sample) -> str:
    """One line for a sample; fields without a figure are left out."""
    parts = [f"step {sample.step}"]
    if sample.loss is not None:
        parts.append(f"loss {sample.loss:.4f}")
    if sample.step_seconds is not None:
        parts.append(f"{sample.step_seconds:.3f} s/step")
    for label, value in (
        ("alloc", sample.allocated_bytes),
        ("reserved", sample.reserved_bytes),
        ("peak", sample.peak_allocated_bytes),
        ("device", sample.device_used_bytes),
    ):
        if value is not None:
            parts.append(f"{label} {gib(value)}")
    if sample.utilization_percent is not None:
        parts.append(f"util {sample.utilization_percent:.0f}%")
    if sample.power_watts is not None:
        parts.append(f"{sample.power_watts:.0f} W")
    if sample.temperature_c is not None:
        parts.append(f"{sample.temperature_c:.0f} C")
    parts.extend(f"{name} {value:.4g}" for name, value in sorted(sample.scalars.items()))
    return "trainfit: " + " | ".join(parts)


class ConsoleSink:
    """A line per sample, the OOM paragraph and notes, to a text stream (stderr by default)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def write(self, sample: Sample) -> None:
        self._line(console_line(sample))

    def write_oom(self, report: OomReport) -> None:
        self._line("trainfit: " + oom_text(report))

    def note(self, note: MonitorNote) -> None:
        self._line("trainfit: note: " + monitor_note_text(note))

    def close(self) -> None:
        pass


CSV_COLUMNS = tuple(f.name for f in fields(Sample) if f.name != "scalars")
"""The CSV's fixed columns; the scalars of the first sample follow, by name."""


class CsvSink:
    """A CSV file: a header at the first sample, then a row per sample, flushed.

    NB: the columns are fixed at the first sample: a scalar first passed later is not written
    (TensorBoard and the console get it); one note says so. An existing file is replaced.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            self._file: TextIO | None = open(self.path, "w", newline="")  # noqa: SIM115
        except OSError as exc:
            raise TrainfitError(f"cannot write the monitor's CSV {self.path}: {exc}") from exc
        self._writer = csv.writer(self._file)
        self._scalars: tuple[str, ...] | None = None
        self.dropped: set[str] = set()
        """Scalars not written, not yet noted (the monitor notes and clears them)."""
        self._told: set[str] = set()

    def write(self, sample: Sample) -> None:
        if self._file is None:
            return
        if self._scalars is None:
            self._scalars = tuple(sorted(sample.scalars))
            self._writer.writerow((*CSV_COLUMNS, *self._scalars))
        new = set(sample.scalars) - set(self._scalars) - self._told
        self.dropped.update(new)
        self._told.update(new)
        row = [getattr(sample, name) for name in CSV_COLUMNS]
        row += [sample.scalars.get(name) for name in self._scalars]
        self._writer.writerow(["" if v is None else v for v in row])
        self._file.flush()

    def write_oom(self, report: OomReport) -> None:
        pass  # NB: the CSV holds samples only; the report goes to the console and TensorBoard

    def note(self, note: MonitorNote) -> None:
        pass

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


TB_TAGS = {
    "allocated_bytes": "memory/allocated_GiB",
    "reserved_bytes": "memory/reserved_GiB",
    "peak_allocated_bytes": "memory/peak_allocated_GiB",
    "device_used_bytes": "memory/device_used_GiB",
    "utilization_percent": "gpu/utilization_percent",
    "power_watts": "gpu/power_W",
    "temperature_c": "gpu/temperature_C",
    "loss": "train/loss",
    "step_seconds": "train/step_seconds",
}
"""TensorBoard tag of each Sample field (bytes are written in GiB); scalars go to train/<name>."""


class TensorBoardSink:
    """Scalars per sample and the OOM paragraph as text, through torch's SummaryWriter."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise TrainfitError(
                "the monitor's TensorBoard output needs the tensorboard package: "
                "pip install tensorboard"
            ) from exc
        self._writer: Any = SummaryWriter(log_dir=os.fspath(log_dir))
        self.log_dir = self._writer.log_dir

    def write(self, sample: Sample) -> None:
        if self._writer is None:
            return
        for name, tag in TB_TAGS.items():
            value = getattr(sample, name)
            if value is None:
                continue
            if name.endswith("_bytes"):
                value = value / GIB
            self._writer.add_scalar(tag, value, sample.step, walltime=sample.time)
        for name, value in sample.scalars.items():
            self._writer.add_scalar(f"train/{name}", value, sample.step, walltime=sample.time)
        self._writer.flush()

    def write_oom(self, report: OomReport) -> None:
        if self._writer is None:
            return
        self._writer.add_text("trainfit/out_of_memory", oom_text(report), report.step)
        self._writer.flush()

    def note(self, note: MonitorNote) -> None:
        pass

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
