"""Raw readings of the local machine, behind a small interface with a fake for tests.

`Probe` is everything `trainfit.hardware.detect` asks of the host; `TorchProbe` asks torch,
NVML, `nvidia-smi`, `sysctl` and the OS, and `FakeProbe` answers from fixed values so that the
CUDA and MPS paths are tested on a CPU-only machine. A probe only reads: parsing, choosing a
source and matching the catalog happen in `detect`.

A reading that does not exist returns None (no GPU driver tool, no `sysctl`, a torch without
an API); a reading that exists but fails raises (RuntimeError from torch, OSError), and
`detect` turns that into a note.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from trainfit.hardware.host import total_ram_bytes

_TOOL_TIMEOUT_S = 10


@dataclass(frozen=True, kw_only=True, slots=True)
class CudaProperties:
    """What `torch.cuda.get_device_properties(i)` says about one GPU."""

    name: str
    total_memory_bytes: int
    compute_capability: tuple[int, int]
    multiprocessor_count: int


class Probe(Protocol):
    """The readings `detect_local` takes from the host."""

    def cuda_device_count(self) -> int:
        """GPUs torch can use, without initialising CUDA (0 on a CPU-only build)."""
        ...

    def cuda_properties(self, index: int) -> CudaProperties:
        """Name, memory, compute capability and SM count of GPU `index`."""
        ...

    def cuda_free_memory(self, index: int) -> int:
        """Free bytes on GPU `index` as `torch.cuda.mem_get_info` reports them."""
        ...

    def cuda_runtime_version(self) -> str | None:
        """The CUDA version torch was built with (`torch.version.cuda`), None without CUDA."""
        ...

    def nvml_driver_version(self) -> str | None:
        """The driver version from NVML, None when pynvml is not importable or NVML fails."""
        ...

    def nvidia_smi_driver_version(self) -> str | None:
        """The driver version from `nvidia-smi`, None when it is not on PATH or fails."""
        ...

    def mps_available(self) -> bool:
        """`torch.backends.mps.is_available()`."""
        ...

    def mps_recommended_max_memory(self) -> int | None:
        """`torch.mps.recommended_max_memory()`, None when this torch lacks it."""
        ...

    def sysctl(self, key: str) -> str | None:
        """`sysctl -n KEY`, stripped; None when sysctl is missing or fails."""
        ...

    def system(self) -> str:
        """`platform.system()`: "Linux", "Darwin", "Windows" ..."""
        ...

    def processor(self) -> str:
        """`platform.processor()` (often empty or just the architecture on Linux)."""
        ...

    def cpuinfo(self) -> str | None:
        """The text of /proc/cpuinfo, None where there is none."""
        ...

    def cpu_count(self) -> int | None:
        """`os.cpu_count()`: logical cores of the machine."""
        ...

    def usable_cpu_count(self) -> int | None:
        """`len(os.sched_getaffinity(0))`, None where the OS lacks it (macOS, Windows)."""
        ...

    def total_ram_bytes(self) -> int | None:
        """Physical memory (`trainfit.hardware.host.total_ram_bytes`)."""
        ...

    def torch_threads(self) -> int:
        """`torch.get_num_threads()`."""
        ...

    def torch_version(self) -> str:
        """`torch.__version__`."""
        ...


def _tool(argv: list[str]) -> str | None:
    """Stdout of a command-line tool, stripped; None when missing, failing or silent."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if out.returncode == 0 and text else None


class TorchProbe:
    """The real probe: torch, NVML, nvidia-smi, sysctl and the OS."""

    def cuda_device_count(self) -> int:
        # NB: is_available() and device_count() ask the driver for a count without creating a
        # context; torch.cuda.is_initialized() stays False (checked in tests/test_detect.py).
        if not torch.cuda.is_available():
            return 0
        return torch.cuda.device_count()

    def cuda_properties(self, index: int) -> CudaProperties:
        p = torch.cuda.get_device_properties(index)
        return CudaProperties(
            name=p.name,
            total_memory_bytes=int(p.total_memory),
            compute_capability=(int(p.major), int(p.minor)),
            multiprocessor_count=int(p.multi_processor_count),
        )

    def cuda_free_memory(self, index: int) -> int:
        free, _total = torch.cuda.mem_get_info(index)
        return int(free)

    def cuda_runtime_version(self) -> str | None:
        return torch.version.cuda

    def nvml_driver_version(self) -> str | None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
            try:
                version = pynvml.nvmlSystemGetDriverVersion()
            finally:
                pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            return None
        # NB: older nvidia-ml-py releases return bytes, newer ones str.
        return version.decode() if isinstance(version, bytes) else str(version)

    def nvidia_smi_driver_version(self) -> str | None:
        out = _tool(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        # One line per GPU, all the same driver.
        return out.splitlines()[0].strip() if out else None

    def mps_available(self) -> bool:
        return bool(torch.backends.mps.is_available())

    def mps_recommended_max_memory(self) -> int | None:
        # NB: documented from torch 2.5 on (pytorch#128289, merged 2024-06-12); absent from the
        # torch 2.0-2.3 docs and not found in 2.4's, so it is looked up rather than assumed.
        fn = getattr(torch.mps, "recommended_max_memory", None)
        return None if fn is None else int(fn())

    def sysctl(self, key: str) -> str | None:
        return _tool(["sysctl", "-n", key])

    def system(self) -> str:
        return platform.system()

    def processor(self) -> str:
        return platform.processor()

    def cpuinfo(self) -> str | None:
        try:
            return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def cpu_count(self) -> int | None:
        return os.cpu_count()

    def usable_cpu_count(self) -> int | None:
        affinity = getattr(os, "sched_getaffinity", None)
        return None if affinity is None else len(affinity(0))

    def total_ram_bytes(self) -> int | None:
        return total_ram_bytes()

    def torch_threads(self) -> int:
        return torch.get_num_threads()

    def torch_version(self) -> str:
        return torch.__version__


@dataclass(kw_only=True)
class FakeGpu:
    """One GPU of a `FakeProbe`."""

    properties: CudaProperties
    free_memory_bytes: int | None = None
    """None: `cuda_free_memory` raises RuntimeError, as mem_get_info does on a busy GPU."""


@dataclass(kw_only=True)
class FakeProbe:
    """A probe answering from fixed values; `calls` records what was asked, in order."""

    gpus: tuple[FakeGpu, ...] = ()
    cuda_version: str | None = None
    nvml_driver: str | None = None
    smi_driver: str | None = None
    mps: bool = False
    mps_recommended: int | None = None
    sysctl_values: dict[str, str] = field(default_factory=dict)
    system_name: str = "Linux"
    processor_name: str = ""
    cpuinfo_text: str | None = None
    logical_cores: int | None = 8
    usable_cores: int | None = 8
    ram_bytes: int | None = 32 << 30
    threads: int = 8
    version: str = "2.13.0"
    calls: list[str] = field(default_factory=list)

    def _called(self, name: str) -> None:
        self.calls.append(name)

    def cuda_device_count(self) -> int:
        self._called("cuda_device_count")
        return len(self.gpus)

    def cuda_properties(self, index: int) -> CudaProperties:
        self._called("cuda_properties")
        return self.gpus[index].properties

    def cuda_free_memory(self, index: int) -> int:
        self._called("cuda_free_memory")
        free = self.gpus[index].free_memory_bytes
        if free is None:
            raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable")
        return free

    def cuda_runtime_version(self) -> str | None:
        self._called("cuda_runtime_version")
        return self.cuda_version

    def nvml_driver_version(self) -> str | None:
        self._called("nvml_driver_version")
        return self.nvml_driver

    def nvidia_smi_driver_version(self) -> str | None:
        self._called("nvidia_smi_driver_version")
        return self.smi_driver

    def mps_available(self) -> bool:
        self._called("mps_available")
        return self.mps

    def mps_recommended_max_memory(self) -> int | None:
        self._called("mps_recommended_max_memory")
        return self.mps_recommended

    def sysctl(self, key: str) -> str | None:
        self._called(f"sysctl {key}")
        return self.sysctl_values.get(key)

    def system(self) -> str:
        return self.system_name

    def processor(self) -> str:
        return self.processor_name

    def cpuinfo(self) -> str | None:
        self._called("cpuinfo")
        return self.cpuinfo_text

    def cpu_count(self) -> int | None:
        return self.logical_cores

    def usable_cpu_count(self) -> int | None:
        return self.usable_cores

    def total_ram_bytes(self) -> int | None:
        return self.ram_bytes

    def torch_threads(self) -> int:
        return self.threads

    def torch_version(self) -> str:
        return self.version
