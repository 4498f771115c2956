"""What the user should know about a monitored run, as typed values (`Monitor.notes`).

The words are made where they are written (`trainfit.monitor.oom_words.monitor_note_text`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class NvmlMissing:
    """nvidia-ml-py is not installed: no utilisation, power or temperature."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NvmlFailed:
    """NVML failed to start: no utilisation, power or temperature."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NvmlNoMatch:
    """No NVML device is known to be the torch device (no UUID, and CUDA_VISIBLE_DEVICES set,
    so its index would name another GPU): no utilisation, power or temperature."""

    device: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CounterOff:
    """One NVML counter failed (not supported on this board, no permission): off from then on."""

    counter: str
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SinkCloseFailed:
    """Closing a sink (a file) failed; the others were closed."""

    sink: str
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SamplerStopped:
    """The sampler thread stopped on an error; the training went on without its counters."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CsvColumnsDropped:
    """Scalars first passed after the CSV's first record: not written there."""

    columns: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class OomReportFailed:
    """Building the out-of-memory report failed (the error itself is re-raised)."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class OomMemoryUnread:
    """Reading memory after an out-of-memory error failed: the report has no figures."""

    error: str


MonitorNote = (
    NvmlMissing
    | NvmlFailed
    | NvmlNoMatch
    | CounterOff
    | SinkCloseFailed
    | SamplerStopped
    | CsvColumnsDropped
    | OomReportFailed
    | OomMemoryUnread
)
"""A note of a monitored run."""
