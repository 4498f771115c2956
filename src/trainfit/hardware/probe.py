"""Raw readings of the local machine, behind a small interface with a fake for tests.

`Probe` is everything `trainfit.hardware.detect` and `trainfit.measure.doctor` ask of the host (the
doctor's tiny training step included); `TorchProbe` asks torch,
NVML, `nvidia-smi`, `sysctl` and the OS, and `FakeProbe` answers from fixed values so that the
CUDA and MPS paths are tested on a CPU-only machine. A probe only reads: parsing, choosing a
source and matching the catalog happen in `detect`.

A reading that does not exist returns None (no GPU driver tool, no `sysctl`, a torch without
an API); a reading that exists but fails raises (RuntimeError from torch, OSError), and
`detect` turns that into a note.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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


@dataclass(frozen=True, kw_only=True, slots=True)
class StepReading:
    """What one tiny real training step (`Probe.tiny_train_step`) did on a device."""

    device: str
    """The torch device it ran on: "cpu", "cuda:0", "mps"."""
    bf16_autocast: bool
    """Whether the forward ran under `torch.autocast(dtype=torch.bfloat16)`."""
    loss: float
    """The loss of the step's forward, as a Python float (NaN or inf when the stack is broken)."""
    params_changed: bool
    """Whether the AdamW step changed at least one parameter."""
    seconds: float
    """Wall time of forward, backward and optimizer step, device-synchronised (first call: it
    includes kernel loading and library start-up)."""


TINY_MLP_WIDTHS = (32, 64, 64, 4)
"""Layer widths of the doctor's MLP: 3 Linear layers with GELU between, about 6.6k parameters."""
TINY_BATCH = 16


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

    def cuda_bf16_supported(self, index: int) -> bool:
        """Native bf16 on GPU `index`: `torch.cuda.is_bf16_supported(including_emulation=False)`
        with that GPU current."""
        ...

    def cuda_arch_list(self) -> tuple[str, ...]:
        """`torch.cuda.get_arch_list()`: the GPU architectures this torch has kernels for
        ("sm_90", "compute_120" ...); empty on a CPU-only build."""
        ...

    def float32_matmul_precision(self) -> str:
        """`torch.get_float32_matmul_precision()`: "highest" (TF32 off), "high" or "medium"."""
        ...

    def nccl_available(self) -> bool:
        """`torch.distributed.is_available() and torch.distributed.is_nccl_available()`."""
        ...

    def nccl_version(self) -> str | None:
        """`torch.cuda.nccl.version()` as "2.27.3", None when torch has no NCCL."""
        ...

    def nvml_cuda_driver_version(self) -> int | None:
        """`pynvml.nvmlSystemGetCudaDriverVersion()`: the newest CUDA the driver supports, as
        1000 * major + 10 * minor (13000 for 13.0); None without pynvml or NVML."""
        ...

    def nvidia_smi_cuda_version(self) -> str | None:
        """The "CUDA Version: 13.0" of `nvidia-smi`'s banner, None when it is missing or fails."""
        ...

    def nvidia_smi_gpus(self) -> tuple[str, ...] | None:
        """GPU names `nvidia-smi --query-gpu=name` lists; None when nvidia-smi is missing or
        fails (it fails when no driver is loaded)."""
        ...

    def mps_built(self) -> bool:
        """`torch.backends.mps.is_built()`: this torch has the MPS backend compiled in."""
        ...

    def mac_version(self) -> str | None:
        """`platform.mac_ver()[0]` ("14.5"), None off macOS."""
        ...

    def env(self, name: str) -> str | None:
        """The environment variable `name`, None when unset."""
        ...

    def tiny_train_step(self, device: str, bf16_autocast: bool) -> StepReading:
        """One real training step of a tiny MLP on `device` (forward, backward, AdamW step).

        Raises whatever torch raises when the device cannot train (RuntimeError mostly).
        """
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


def _nvml_read(name: str) -> Any:
    """`pynvml.<name>()`, None without pynvml or NVML (`trainfit.hardware.nvml`)."""
    from trainfit.hardware import nvml

    return nvml.read(name)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def tiny_train_step(device: str, bf16_autocast: bool) -> StepReading:
    """One real training step of a tiny MLP on `device`; see `Probe.tiny_train_step`.

    The weights and the batch come from a fixed seed; the global random state is left as it was
    (`fork_rng`, CPU only, so that no CUDA context is created for it).
    """
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(TINY_MLP_WIDTHS)):
            if i:
                layers.append(torch.nn.GELU())
            layers.append(torch.nn.Linear(n_in, n_out))
        model = torch.nn.Sequential(*layers)
        x = torch.randn(TINY_BATCH, TINY_MLP_WIDTHS[0])
        y = torch.randint(0, TINY_MLP_WIDTHS[-1], (TINY_BATCH,))
    model.to(dev)
    x, y = x.to(dev), y.to(dev)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    autocast = (
        torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        if bf16_autocast
        else contextlib.nullcontext()
    )
    _synchronize(dev)
    start = time.perf_counter()
    with autocast:
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _synchronize(dev)
    seconds = time.perf_counter() - start
    params = list(model.parameters())
    changed = any(not torch.equal(b, p.detach()) for b, p in zip(before, params, strict=True))
    return StepReading(
        device=device,
        bf16_autocast=bf16_autocast,
        loss=float(loss.detach().float().cpu()),
        params_changed=changed,
        seconds=seconds,
    )


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
        version = _nvml_read("nvmlSystemGetDriverVersion")
        if version is None:
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

    def cuda_bf16_supported(self, index: int) -> bool:
        # NB: is_bf16_supported asks about the current device only, so GPU `index` is made
        # current; including_emulation=False leaves out pre-Ampere GPUs, where bf16 "works" by
        # emulation at fp32 speed (the argument exists from torch 2.3 on; the floor is 2.4).
        with torch.cuda.device(index):
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))

    def cuda_arch_list(self) -> tuple[str, ...]:
        return tuple(torch.cuda.get_arch_list())

    def float32_matmul_precision(self) -> str:
        return torch.get_float32_matmul_precision()

    def nccl_available(self) -> bool:
        import torch.distributed as dist

        return bool(dist.is_available() and dist.is_nccl_available())

    def nccl_version(self) -> str | None:
        if not self.nccl_available():
            return None
        # NB: a tuple (major, minor, patch[, suffix]) from torch 1.13 on, an int before.
        version = torch.cuda.nccl.version()
        if isinstance(version, tuple):
            return ".".join(str(v) for v in version[:3]) + "".join(str(v) for v in version[3:])
        return str(version)

    def nvml_cuda_driver_version(self) -> int | None:
        version = _nvml_read("nvmlSystemGetCudaDriverVersion")
        return None if version is None else int(version)

    def nvidia_smi_cuda_version(self) -> str | None:
        banner = _tool(["nvidia-smi"])
        found = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", banner or "")
        return found.group(1) if found else None

    def nvidia_smi_gpus(self) -> tuple[str, ...] | None:
        out = _tool(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
        return None if out is None else tuple(line.strip() for line in out.splitlines())

    def mps_built(self) -> bool:
        return bool(torch.backends.mps.is_built())

    def mac_version(self) -> str | None:
        return platform.mac_ver()[0] or None

    def env(self, name: str) -> str | None:
        return os.environ.get(name)

    def tiny_train_step(self, device: str, bf16_autocast: bool) -> StepReading:
        return tiny_train_step(device, bf16_autocast)


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
    arch_list: tuple[str, ...] = ()
    matmul_precision: str = "highest"
    nccl: bool = False
    nccl_ver: str | None = None
    nvml_cuda_driver: int | None = None
    smi_cuda: str | None = None
    smi_gpus: tuple[str, ...] | None = None
    mps_is_built: bool | None = None
    """None: built exactly when `mps` (available) is True."""
    mac_release: str | None = None
    environ: dict[str, str] = field(default_factory=dict)
    step_errors: dict[str, str] = field(default_factory=dict)
    """Device -> message of the RuntimeError its tiny step raises."""
    step_readings: dict[str, StepReading] = field(default_factory=dict)
    """Device -> what its tiny step returns; otherwise a healthy step (loss 1.3863, updated)."""
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

    def cuda_bf16_supported(self, index: int) -> bool:
        self._called("cuda_bf16_supported")
        return self.gpus[index].properties.compute_capability >= (8, 0)

    def cuda_arch_list(self) -> tuple[str, ...]:
        return self.arch_list

    def float32_matmul_precision(self) -> str:
        return self.matmul_precision

    def nccl_available(self) -> bool:
        return self.nccl

    def nccl_version(self) -> str | None:
        self._called("nccl_version")
        return self.nccl_ver

    def nvml_cuda_driver_version(self) -> int | None:
        self._called("nvml_cuda_driver_version")
        return self.nvml_cuda_driver

    def nvidia_smi_cuda_version(self) -> str | None:
        self._called("nvidia_smi_cuda_version")
        return self.smi_cuda

    def nvidia_smi_gpus(self) -> tuple[str, ...] | None:
        self._called("nvidia_smi_gpus")
        return self.smi_gpus

    def mps_built(self) -> bool:
        return self.mps if self.mps_is_built is None else self.mps_is_built

    def mac_version(self) -> str | None:
        return self.mac_release

    def env(self, name: str) -> str | None:
        return self.environ.get(name)

    def tiny_train_step(self, device: str, bf16_autocast: bool) -> StepReading:
        self._called(f"tiny_train_step {device}")
        if device in self.step_errors:
            raise RuntimeError(self.step_errors[device])
        return self.step_readings.get(device) or StepReading(
            device=device,
            bf16_autocast=bf16_autocast,
            loss=1.3863,
            params_changed=True,
            seconds=0.002,
        )
