"""One record of the monitor: what one optimizer step used."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    """What the monitor recorded at one optimizer step; None where the source had no figure."""

    step: int
    """Optimizer steps done (1 after the first)."""
    time: float
    """Wall-clock time of the record (seconds since the epoch)."""
    step_seconds: float | None
    """Mean wall time per optimizer step since the previous record (the first: since the
    monitor started). NB: not device-synchronised; queued kernels land in a later step."""
    allocated_bytes: int | None
    """Bytes held by live tensors now (CPU: the process's resident set)."""
    reserved_bytes: int | None
    """Bytes the caching allocator holds now."""
    peak_allocated_bytes: int | None
    """Highest allocated since the previous record (the allocator's peak, reset each record)."""
    device_used_bytes: int | None
    """Memory in use on the whole device, all processes and the CUDA context (NVML)."""
    utilization_percent: float | None
    """GPU utilisation, mean of the sampler's readings since the previous record."""
    power_watts: float | None
    """Board power, mean of the sampler's readings since the previous record."""
    temperature_c: float | None
    """GPU temperature at the latest reading."""
    loss: float | None
    scalars: Mapping[str, float] = field(default_factory=dict)
    """Other values passed to `Monitor.step(**scalars)`."""
