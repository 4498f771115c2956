"""Where the monitor's numbers come from: the framework's allocator and NVML.

Two small interfaces, each with a fake for CPU-only tests:

- `MemorySource`: allocated, reserved and peak-allocated bytes of this process's allocator
  (`torch.cuda`, `torch.mps`, or the CPU's resident set), and the device's total and used bytes.
- `GpuSource`: utilisation, power, temperature and memory in use of the whole GPU (NVML through
  nvidia-ml-py, `import pynvml`). NVML missing or failing gives None fields and one note, never
  an error: a monitor must not stop a training run.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from trainfit.errors import SpecError
from trainfit.monitor.notes import (
    CounterOff,
    MonitorNote,
    NvmlFailed,
    NvmlMissing,
    NvmlNoMatch,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryReading:
    """One reading of the allocator; None where the source cannot tell."""

    allocated_bytes: int | None
    """Bytes held by live tensors (CPU: the resident set of the process)."""
    reserved_bytes: int | None
    """Bytes the caching allocator holds from the device (CUDA; MPS: the driver's)."""
    peak_allocated_bytes: int | None
    """Highest allocated since the last `reset_peak()`."""
    total_bytes: int | None
    """The device's memory (CUDA: what the runtime reports)."""
    device_used_bytes: int | None = None
    """Memory in use on the whole device, all processes (CUDA: total minus cudaMemGetInfo's
    free)."""


class MemorySource(Protocol):
    """The allocator of the device the training runs on."""

    name: str

    def read(self, device_used: bool = False) -> MemoryReading:
        """Read now; `device_used` also asks the device-wide figure (a driver call)."""
        ...

    def reset_peak(self) -> None:
        """Start a new peak window."""
        ...

    def poll(self) -> None:
        """Called by the sampler thread: sources without a native peak track it here."""
        ...


class CudaMemory:
    """`torch.cuda`'s caching allocator on one device."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.name = f"cuda:{device.index}"

    def read(self, device_used: bool = False) -> MemoryReading:
        used = total = None
        if device_used:
            free, total = torch.cuda.mem_get_info(self.device)
            used = total - free
        else:
            total = torch.cuda.get_device_properties(self.device).total_memory
        return MemoryReading(
            allocated_bytes=torch.cuda.memory_allocated(self.device),
            reserved_bytes=torch.cuda.memory_reserved(self.device),
            peak_allocated_bytes=torch.cuda.max_memory_allocated(self.device),
            total_bytes=total,
            device_used_bytes=used,
        )

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def poll(self) -> None:
        pass


class _PolledPeak:
    """A peak kept by polling, for allocators that keep none (MPS, the CPU's resident set).

    NB: polled every `interval_s` by the sampler thread and at each step, so a short spike
    between two polls is missed: the peak is a lower bound.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._peak: int | None = None

    def see(self, value: int | None) -> None:
        if value is None:
            return
        with self._lock:
            self._peak = value if self._peak is None else max(self._peak, value)

    def take(self, current: int | None) -> int | None:
        self.see(current)
        with self._lock:
            return self._peak

    def reset(self) -> None:
        with self._lock:
            self._peak = None


class MpsMemory:
    """`torch.mps`: allocated by tensors and what the Metal driver holds (as reserved)."""

    name = "mps"

    def __init__(self) -> None:
        self._peak = _PolledPeak()

    def read(self, device_used: bool = False) -> MemoryReading:
        allocated = torch.mps.current_allocated_memory()
        return MemoryReading(
            allocated_bytes=allocated,
            reserved_bytes=torch.mps.driver_allocated_memory(),
            peak_allocated_bytes=self._peak.take(allocated),
            total_bytes=torch.mps.recommended_max_memory(),
        )

    def reset_peak(self) -> None:
        self._peak.reset()

    def poll(self) -> None:
        self._peak.see(torch.mps.current_allocated_memory())


class CpuMemory:
    """The process's resident set (Linux /proc) as "allocated"; no reserved figure."""

    name = "cpu"

    def __init__(self) -> None:
        self._peak = _PolledPeak()

    def read(self, device_used: bool = False) -> MemoryReading:
        from trainfit.measure.rss import current_rss_bytes

        rss = current_rss_bytes()
        return MemoryReading(
            allocated_bytes=rss,
            reserved_bytes=None,
            peak_allocated_bytes=self._peak.take(rss),
            total_bytes=_host_memory_bytes(),
        )

    def reset_peak(self) -> None:
        self._peak.reset()

    def poll(self) -> None:
        from trainfit.measure.rss import current_rss_bytes

        self._peak.see(current_rss_bytes())


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(kw_only=True)
class FakeMemory:
    """A scripted allocator for tests: `readings` are returned in turn (the last one repeats)."""

    readings: list[MemoryReading]
    name: str = "fake"
    resets: int = 0
    polls: int = 0
    _next: int = field(default=0, repr=False)

    def read(self, device_used: bool = False) -> MemoryReading:
        reading = self.readings[min(self._next, len(self.readings) - 1)]
        self._next += 1
        return reading

    def reset_peak(self) -> None:
        self.resets += 1

    def poll(self) -> None:
        self.polls += 1


def memory_source(device: str | torch.device | None) -> MemorySource:
    """The allocator of `device`; None picks CUDA when available, else MPS, else the CPU."""
    if device is None:
        if torch.cuda.is_available():
            device = torch.device("cuda", torch.cuda.current_device())
        elif torch.backends.mps.is_available():
            device = torch.device("mps")
        else:
            device = torch.device("cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise SpecError(
            [
                f"monitor device {device!r} is not a torch device: give 'cuda', 'cuda:1', 'mps' "
                "or 'cpu'"
            ]
        ) from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SpecError(["monitor device is CUDA but torch sees no CUDA GPU: give 'cpu'"])
        index = torch.cuda.current_device() if device.index is None else device.index
        return CudaMemory(torch.device("cuda", index))
    if device.type == "mps":
        if not torch.backends.mps.is_available():
            raise SpecError(["monitor device is MPS but torch sees no Apple GPU: give 'cpu'"])
        return MpsMemory()
    if device.type == "cpu":
        return CpuMemory()
    raise SpecError([f"monitor device type {device.type!r}: choose one of cpu, cuda, mps"])


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuReading:
    """One NVML reading of the whole GPU; None where NVML gives no figure."""

    utilization_percent: float | None = None
    """Share of the last sample period in which a kernel ran (NVML's `gpu` utilisation)."""
    power_watts: float | None = None
    temperature_c: float | None = None
    memory_used_bytes: int | None = None
    """Memory in use on the GPU by all processes (NVML), context included."""


class GpuSource(Protocol):
    """Device-wide counters, read by the sampler thread."""

    notes: list[MonitorNote]

    def read(self) -> GpuReading: ...

    def close(self) -> None: ...


class NoGpu:
    """No device counters (CPU, MPS, or NVML not asked for)."""

    def __init__(self) -> None:
        self.notes: list[MonitorNote] = []

    def read(self) -> GpuReading:
        return GpuReading()

    def close(self) -> None:
        pass


@dataclass(kw_only=True)
class FakeGpu:
    """Scripted NVML readings for tests (the last one repeats)."""

    readings: list[GpuReading]
    notes: list[MonitorNote] = field(default_factory=list)
    closed: bool = False
    _next: int = field(default=0, repr=False)

    def read(self) -> GpuReading:
        reading = self.readings[min(self._next, len(self.readings) - 1)]
        self._next += 1
        return reading

    def close(self) -> None:
        self.closed = True


class NvmlSource:
    """NVML (nvidia-ml-py) counters of the GPU behind a torch CUDA device.

    Each counter that fails (not supported on this board, no permission) is None from then on,
    with one note naming it; NVML failing to load gives a source of Nones with one note.
    """

    _COUNTERS = ("utilization", "power", "temperature", "memory")

    def __init__(self, device: torch.device, nvml: Any = None) -> None:
        self.notes: list[MonitorNote] = []
        self._dead: set[str] = set()
        self._handle = None
        self._nvml = nvml
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            self._nvml.nvmlInit()
            self._handle = self._find_handle(device)
        except ImportError:
            self.notes.append(NvmlMissing())
        except Exception as exc:  # NB: any NVML failure; the run must go on
            self.notes.append(NvmlFailed(error=str(exc)))

    def _find_handle(self, device: torch.device) -> Any:
        from trainfit.hardware.nvml import handle

        found = handle(device, self._nvml)
        if found is None:
            self.notes.append(NvmlNoMatch(device=str(device)))
        return found

    def _counter(self, name: str, read: Any) -> Any:
        if name in self._dead:
            return None
        try:
            return read()
        except Exception as exc:  # NB: NVMLError_NotSupported and kin: that counter is off
            self._dead.add(name)
            self.notes.append(CounterOff(counter=name, error=str(exc)))
            return None

    def read(self) -> GpuReading:
        if self._handle is None:
            return GpuReading()
        nvml, handle = self._nvml, self._handle
        util = self._counter("utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        power = self._counter("power", lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
        temp = self._counter(
            "temperature", lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        )
        used = self._counter("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used)
        return GpuReading(
            utilization_percent=None if util is None else float(util),
            power_watts=power,
            temperature_c=None if temp is None else float(temp),
            memory_used_bytes=None if used is None else int(used),
        )

    def close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(Exception):  # NB: shutting down must not fail a run
                self._nvml.nvmlShutdown()
            self._handle = None


def gpu_source(memory: MemorySource) -> GpuSource:
    """NVML for a CUDA device; nothing elsewhere."""
    if isinstance(memory, CudaMemory):
        return NvmlSource(memory.device)
    return NoGpu()
