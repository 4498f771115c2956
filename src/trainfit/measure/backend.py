"""The local device a real run measures, behind a small interface with a fake for tests.

`Backend` is everything `trainfit.measure` asks of the device: synchronise, the allocator's
counters, what the card holds, freeing the cache after an out-of-memory, and telling an
out-of-memory from any other error. `CudaBackend` asks `torch.cuda` (and NVML for the process's
own memory on the card), `MpsBackend` asks `torch.mps`, `CpuBackend` reads the process's
resident memory. `backend_for("cuda:1" | "mps" | "cpu" | None)` picks one; None takes the
first of CUDA, MPS and the CPU that this machine has.

Known limitations:
- On the CPU there is no allocator counter: peak allocated and reserved are None, and the
  memory figure is the peak increase of the resident set over the run's start (the kernel's
  high-water mark, reset per phase on Linux; `ru_maxrss` elsewhere).
- On MPS the peak is sampled at phase boundaries (`torch.mps.current_allocated_memory` and
  `driver_allocated_memory`): MPS has no peak counter, so a peak inside a phase is missed.
  Never run on a Mac (none was available).
- CUDA's "device used" is this process's memory on the card from NVML's process list (the
  CUDA context included). Where NVML does not list this process (a container with its own
  process ids), it is total - free from `cudaMemGetInfo` less the card's use that NVML saw
  before the backend created the context; it moves when another process starts or stops,
  and counts a context this process made before the backend. Without nvidia-ml-py it is
  total - free less what was in use at the start, which misses the context (about 0.5 GiB).
  `used_method` says which one ran.
"""

from __future__ import annotations

import gc
import os
import platform
from typing import Protocol

import torch

from trainfit.errors import MeasureError
from trainfit.hardware import nvml
from trainfit.hardware.catalog import DeviceKind
from trainfit.measure.rss import HighWater, current_rss_bytes

OOM_MARKERS = (
    "out of memory",
    "can't allocate memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
)
"""Substrings of a RuntimeError that mean an allocation failed: cuBLAS and cuDNN raise their
own failures, not torch.OutOfMemoryError; the CPU allocator says "can't allocate memory"."""
_OOM_ERROR = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)  # NB: torch < 2.5


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is a device (or host) allocation failure."""
    if isinstance(exc, _OOM_ERROR | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in OOM_MARKERS)


class TimingEvent(Protocol):
    """A marker in the device's queue whose time the device records (`torch.cuda.Event`)."""

    def record(self) -> None: ...

    def elapsed_time(self, end: TimingEvent) -> float:
        """Milliseconds from this event to `end`, both recorded and reached."""
        ...


class Backend(Protocol):
    """What a real run reads from, and does to, the local device."""

    kind: DeviceKind
    """CUDA, MPS or CPU (its value is the `torch.device` type)."""
    device: torch.device

    def name(self) -> str:
        """The device's own name ("NVIDIA H100 80GB HBM3", "Apple M2", "Linux x86_64 CPU")."""
        ...

    def synchronize(self) -> None:
        """Wait for the device's queued work."""
        ...

    def timing_events(self) -> tuple[TimingEvent, TimingEvent] | None:
        """Two fresh events that time the device's own timeline between them (None: the
        backend has none, the host clock serves)."""
        ...

    def allocated(self) -> int | None:
        """Bytes of live tensors the allocator holds now; None where there is no counter."""
        ...

    def reserved(self) -> int | None:
        """Bytes the allocator has taken from the device now (cached blocks included)."""
        ...

    def take_peaks(self) -> tuple[int | None, int | None, int | None]:
        """(peak allocated, peak reserved, peak memory used) since the last call, then reset.

        Memory used is what the process has added on the device since `start()`: CUDA the
        card's used memory, MPS the driver's allocation, the CPU the resident set."""
        ...

    def start(self) -> None:
        """Take the baseline (memory in use before the run) and reset the peaks."""
        ...

    def baseline_used(self) -> int:
        """Memory in use on the device when `start()` ran (other processes, or the process's
        own resident set on the CPU)."""
        ...

    def total_memory(self) -> int | None:
        """The device's memory (the RAM for the CPU; MPS: the recommended working set)."""
        ...

    def free_memory(self) -> int | None:
        """Free device memory now, None where it cannot be read."""
        ...

    def release(self) -> None:
        """Free what a failed attempt left: collect garbage and return cached blocks."""
        ...

    def versions(self) -> dict[str, str]:
        """Versions of the software stack that ran the steps."""
        ...


class CudaBackend:
    """A CUDA GPU through `torch.cuda`."""

    kind = DeviceKind.CUDA

    def __init__(self, device: torch.device) -> None:
        if not torch.cuda.is_available():
            raise MeasureError(
                "no CUDA GPU is visible here (torch.cuda.is_available() is False): run on a "
                "machine with an NVIDIA GPU and a CUDA build of torch (`trainfit doctor` checks "
                "both), or pass --on cpu"
            )
        index = torch.cuda.current_device() if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise MeasureError(
                f"cuda:{index} does not exist: this machine has {torch.cuda.device_count()} "
                f"CUDA GPU(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}"
            )
        self.device = torch.device("cuda", index)
        # NB: read before set_device, which creates this process's CUDA context (CUDA 12+)
        self._before_context = nvml.device_used_bytes(self.device)
        torch.cuda.set_device(self.device)
        self._baseline = 0
        self._own = False
        self.used_method = ""

    def name(self) -> str:
        return torch.cuda.get_device_name(self.device)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def timing_events(self) -> tuple[TimingEvent, TimingEvent] | None:
        with torch.cuda.device(self.device):
            return (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )

    def allocated(self) -> int | None:
        return torch.cuda.memory_allocated(self.device)

    def reserved(self) -> int | None:
        return torch.cuda.memory_reserved(self.device)

    def _used(self) -> int:
        if self._own:
            own = nvml.process_bytes(self.device)
            if own is not None:
                return own + self._baseline
        free, total = torch.cuda.mem_get_info(self.device)
        return total - free

    def take_peaks(self) -> tuple[int | None, int | None, int | None]:
        peaks = (
            torch.cuda.max_memory_allocated(self.device),
            torch.cuda.max_memory_reserved(self.device),
            self._used() - self._baseline,
        )
        torch.cuda.reset_peak_memory_stats(self.device)
        return peaks

    def start(self) -> None:
        self.release()  # NB: an earlier run in this process leaves cached blocks
        free, total = torch.cuda.mem_get_info(self.device)
        own = nvml.process_bytes(self.device)
        self._own = own is not None
        if own is not None:
            self._baseline = (total - free) - own
            self.used_method = "NVML: this process's memory on the card (CUDA context included)"
        elif self._before_context is not None:
            self._baseline = self._before_context
            self.used_method = (
                "cudaMemGetInfo, less the card's use before this process's CUDA context "
                "(NVML device figure; NVML does not list this process, as in a container): "
                "other processes are assumed to hold what they held then"
            )
        else:
            self._baseline = total - free
            self.used_method = (
                "cudaMemGetInfo, less what was in use at the start: without NVML this "
                "process's CUDA context (about 0.5 GiB) is NOT counted"
            )
        torch.cuda.reset_peak_memory_stats(self.device)

    def baseline_used(self) -> int:
        return self._baseline

    def total_memory(self) -> int | None:
        return torch.cuda.get_device_properties(self.device).total_memory

    def free_memory(self) -> int | None:
        return torch.cuda.mem_get_info(self.device)[0]

    def release(self) -> None:
        gc.collect()
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()

    def versions(self) -> dict[str, str]:
        return {
            "torch": torch.__version__,
            "cuda": str(torch.version.cuda),
            "cudnn": str(torch.backends.cudnn.version()),
            "transformers": transformers_version(),
        }


class MpsBackend:
    """An Apple GPU through `torch.mps` (peaks sampled at phase boundaries)."""

    kind = DeviceKind.MPS

    def __init__(self) -> None:
        if not torch.backends.mps.is_available():
            why = (
                "this torch was built without MPS"
                if not torch.backends.mps.is_built()
                else "macOS 12.3 or later on an Apple-silicon Mac is needed"
            )
            raise MeasureError(f"no Apple GPU (MPS) is available here: {why}; or pass --on cpu")
        self.device = torch.device("mps")
        self._peaks = [0, 0, 0]
        self._baseline = 0

    def name(self) -> str:
        return f"Apple GPU (MPS) on {platform.machine()}"

    def synchronize(self) -> None:
        torch.mps.synchronize()

    def timing_events(self) -> tuple[TimingEvent, TimingEvent] | None:
        return None  # NB: MPS events' timing is unchecked on a Mac: the host clock serves

    def allocated(self) -> int | None:
        return int(torch.mps.current_allocated_memory())

    def reserved(self) -> int | None:
        return int(torch.mps.driver_allocated_memory())

    def _sample(self) -> None:
        allocated, driver = self.allocated() or 0, self.reserved() or 0
        self._peaks = [
            max(self._peaks[0], allocated),
            max(self._peaks[1], driver),
            max(self._peaks[2], driver - self._baseline),
        ]

    def take_peaks(self) -> tuple[int | None, int | None, int | None]:
        self._sample()
        peaks = (self._peaks[0], self._peaks[1], self._peaks[2])
        self._peaks = [0, 0, 0]
        return peaks

    def start(self) -> None:
        self._baseline = self.reserved() or 0
        self._peaks = [0, 0, 0]

    def baseline_used(self) -> int:
        return self._baseline

    def total_memory(self) -> int | None:
        fn = getattr(torch.mps, "recommended_max_memory", None)
        return None if fn is None else int(fn())

    def free_memory(self) -> int | None:
        total = self.total_memory()
        return None if total is None else max(0, total - (self.reserved() or 0))

    def release(self) -> None:
        gc.collect()
        torch.mps.synchronize()
        torch.mps.empty_cache()

    def versions(self) -> dict[str, str]:
        return {
            "torch": torch.__version__,
            "macos": platform.mac_ver()[0],
            "transformers": transformers_version(),
        }


class CpuBackend:
    """The CPU: the process's resident memory (no allocator counters)."""

    kind = DeviceKind.CPU

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self._rss = current_rss_bytes
        self._high = HighWater()
        self._baseline = 0

    def name(self) -> str:
        threads = f"{torch.get_num_threads()} of {os.cpu_count()} threads"
        return f"{platform.system()} {platform.machine()} CPU, {threads}"

    def synchronize(self) -> None:
        return None

    def timing_events(self) -> tuple[TimingEvent, TimingEvent] | None:
        return None  # NB: each op runs as it is issued

    def allocated(self) -> int | None:
        return None

    def reserved(self) -> int | None:
        return None

    def take_peaks(self) -> tuple[int | None, int | None, int | None]:
        return None, None, self._high.take() - self._baseline

    def start(self) -> None:
        gc.collect()
        self._baseline = self._rss() or self._high.take()
        self._high.take()

    def baseline_used(self) -> int:
        return self._baseline

    def total_memory(self) -> int | None:
        from trainfit.hardware.host import total_ram_bytes

        return total_ram_bytes()

    def free_memory(self) -> int | None:
        from trainfit.hardware.host import available_ram_bytes

        return available_ram_bytes()

    def release(self) -> None:
        gc.collect()

    def versions(self) -> dict[str, str]:
        return {
            "torch": torch.__version__,
            "python": platform.python_version(),
            "transformers": transformers_version(),
        }


def backend_for(device: str | None) -> Backend:
    """The backend for `device` ("cuda", "cuda:N", "mps", "cpu"), or the best one here (None)."""
    if device is None:
        if torch.cuda.is_available():
            return CudaBackend(torch.device("cuda"))
        if torch.backends.mps.is_available():
            return MpsBackend()
        return CpuBackend()
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise MeasureError(
            f"unknown local device {device!r}: use cuda, cuda:N, mps or cpu"
        ) from None
    if dev.type == "cuda":
        return CudaBackend(dev)
    if dev.type == "mps":
        return MpsBackend()
    if dev.type == "cpu":
        return CpuBackend()
    raise MeasureError(f"unknown local device {device!r}: use cuda, cuda:N, mps or cpu")


def transformers_version() -> str:
    try:
        import transformers
    except ImportError:
        return "not installed"
    return str(transformers.__version__)
