"""What this machine has: CUDA GPUs, Apple MPS, the CPU and RAM, each matched to the catalog.

`detect_local()` reads the host through a `Probe` (`trainfit.hardware.probe`): the real one by
default, a `FakeProbe` in tests. Every reading says where it came from (`Source`), and every
device found is matched to a catalog row through `catalog.get_device` or described as found
with `catalog_match=None` and a note saying why.

Matching tries, in order, the reported name with its memory appended ("RTX 4060 8GB") and the
bare name, each again with leading brand words dropped ("NVIDIA", "Tesla", "GeForce", "Quadro",
"Apple"); a catalog row is accepted only if its kind is the device's and its memory is within
`MEMORY_TOLERANCE` of the memory found, so that an "A100 40GB" never matches an 80 GB row.

Known limitations:
- Free GPU memory comes from `torch.cuda.mem_get_info`, which creates this process's CUDA
  context on each GPU first: the figure is already short of that context, while trainfit's
  "device memory needed" counts a training process's context too. On an H100 80GB HBM3 (torch
  2.11.0+cu130, driver 580.159.04, 2026-11-26; tests/fixtures/detect_h100.json) NVML saw
  85017493504 bytes free before the context and mem_get_info 84465090560 after: 526.8 MiB.
  Free memory is also only a snapshot: other processes come and go.
- ROCm builds of torch answer through torch.cuda with HIP devices; the runtime version is then
  None (`torch.version.cuda`) and the driver is looked up only through NVIDIA's tools.
- The MPS path is written against `FakeProbe` only: it has never run on a Mac.
- The CPU model on Linux is /proc/cpuinfo's "model name", which Arm servers lack; then
  `platform.processor()` (often just the architecture) is what is reported.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from trainfit.errors import UnknownNameError
from trainfit.hardware.catalog import get_device
from trainfit.hardware.probe import Probe, TorchProbe
from trainfit.hardware.units import GIB

MEMORY_TOLERANCE = 0.125
"""Largest relative gap between the memory found and a catalog row's for the row to match.

NB: a framework reports a little less than the marketed size (an 8 GB RTX 4060 shows 8188 MiB,
a 16 GB T4 about 15 GiB), while different variants of one name differ by 2x (A100 40/80 GB)."""

_BRAND_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro", "apple"})


class Source(str, Enum):
    """Where a reading came from."""

    TORCH_CUDA_PROPERTIES = "torch.cuda.get_device_properties"
    TORCH_CUDA_MEM_GET_INFO = "torch.cuda.mem_get_info"
    TORCH_VERSION_CUDA = "torch.version.cuda"
    NVML = "NVML (nvidia-ml-py)"
    NVIDIA_SMI = "nvidia-smi --query-gpu=driver_version"
    TORCH_MPS_RECOMMENDED = "torch.mps.recommended_max_memory()"
    SYSCTL_BRAND = "sysctl -n machdep.cpu.brand_string"
    SYSCTL_MEMSIZE = "sysctl -n hw.memsize"
    PROC_CPUINFO = "/proc/cpuinfo"
    PLATFORM_PROCESSOR = "platform.processor()"
    OS_CPU_COUNT = "os.cpu_count()"
    SCHED_GETAFFINITY = "os.sched_getaffinity(0)"
    HOST_RAM = "trainfit.hardware.host.total_ram_bytes (os.sysconf, else sysctl hw.memsize)"
    TORCH_THREADS = "torch.get_num_threads()"
    NOT_PROBED = "not probed"
    UNKNOWN = "unknown"


@dataclass(frozen=True, kw_only=True, slots=True)
class CudaGpu:
    """One CUDA GPU as torch sees it."""

    index: int
    name: str
    total_memory_bytes: int
    """From `Source.TORCH_CUDA_PROPERTIES`."""
    free_memory_bytes: int | None
    """From `Source.TORCH_CUDA_MEM_GET_INFO`, net of this process's own context; None if failed."""
    compute_capability: tuple[int, int]
    multiprocessor_count: int
    catalog_match: str | None
    """Name of the catalog row this GPU is, or None."""
    match_note: str


@dataclass(frozen=True, kw_only=True, slots=True)
class MpsDevice:
    """The Apple GPU torch can use through Metal (MPS); memory is unified with the CPU's."""

    chip: str | None
    chip_source: Source
    unified_memory_bytes: int | None
    unified_memory_source: Source
    recommended_max_memory_bytes: int | None
    """The working-set size Metal recommends (`recommendedMaxWorkingSetSize`)."""
    recommended_max_memory_source: Source
    catalog_match: str | None
    match_note: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuInfo:
    """The host CPU and RAM."""

    model: str | None
    model_source: Source
    logical_cores: int | None
    """From `Source.OS_CPU_COUNT`."""
    usable_cores: int | None
    """Cores this process may run on; None where the OS cannot say."""
    usable_cores_source: Source
    total_ram_bytes: int | None
    """From `Source.HOST_RAM`."""
    torch_threads: int
    catalog_match: str | None
    match_note: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalMachine:
    """Everything `detect_local` found."""

    torch_version: str
    cuda_gpus: tuple[CudaGpu, ...]
    cuda_runtime_version: str | None
    """The CUDA version torch was built with (`Source.TORCH_VERSION_CUDA`); None without CUDA."""
    driver_version: str | None
    driver_version_source: Source
    mps: MpsDevice | None
    """None when `torch.backends.mps.is_available()` is False."""
    cpu: CpuInfo
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (bytes as integers, sources as their text)."""
        return _plain(asdict(self))


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _candidates(name: str, memory_bytes: int | None) -> list[str]:
    """Spellings of a reported device name to look up in the catalog, most specific first."""
    words = name.split()
    bare: list[str] = []
    while words:
        bare.append(" ".join(words))
        if words[0].lower() not in _BRAND_WORDS:
            break
        words = words[1:]
    if not memory_bytes:
        return bare
    # NB: marketed sizes are GB rounded up from what the framework reports (79.2 GiB -> 80GB).
    size = f"{math.ceil(memory_bytes / GIB)}GB"
    return [f"{b} {size}" for b in bare] + bare


def match_catalog(name: str, kind: str, memory_bytes: int | None) -> tuple[str | None, str]:
    """The catalog row a device found as `name` is, and how it was (or was not) matched."""
    rejected: dict[str, str] = {}
    close: tuple[str, ...] = ()
    for candidate in _candidates(name, memory_bytes):
        try:
            device = get_device(candidate)
        except UnknownNameError as exc:
            close = close or exc.close_matches
            continue
        if device.name in rejected:
            continue
        if device.kind != kind:
            rejected[device.name] = f"{device.name!r} is a {device.kind} row, not {kind}"
            continue
        if not (memory_bytes and device.memory_bytes):
            return device.name, f"catalog row {device.name!r}: the name agrees"
        gap = abs(device.memory_bytes - memory_bytes) / device.memory_bytes
        if gap > MEMORY_TOLERANCE:
            rejected[device.name] = (
                f"{device.name!r} has {device.memory_bytes / GIB:.1f} GiB, "
                f"this one {memory_bytes / GIB:.1f} GiB"
            )
            continue
        return device.name, f"catalog row {device.name!r}: the name and memory agree"
    note = f"no catalog row for {name!r}; described as found"
    if rejected:
        note += f" (name matched but {'; '.join(rejected.values())})"
    elif close:
        note += f" (closest rows: {', '.join(close)})"
    return None, note


def _detect_cuda(probe: Probe, count: int, notes: list[str]) -> tuple[CudaGpu, ...]:
    gpus = []
    for index in range(count):
        try:
            props = probe.cuda_properties(index)
        except RuntimeError as exc:
            notes.append(f"CUDA GPU {index}: torch could not read its properties: {exc}")
            continue
        try:
            free: int | None = probe.cuda_free_memory(index)
        except RuntimeError as exc:
            free = None
            notes.append(f"CUDA GPU {index}: free memory unknown: {exc}")
        match, match_note = match_catalog(props.name, "cuda", props.total_memory_bytes)
        gpus.append(
            CudaGpu(
                index=index,
                name=props.name,
                total_memory_bytes=props.total_memory_bytes,
                free_memory_bytes=free,
                compute_capability=props.compute_capability,
                multiprocessor_count=props.multiprocessor_count,
                catalog_match=match,
                match_note=match_note,
            )
        )
    return tuple(gpus)


def _driver_version(probe: Probe) -> tuple[str | None, Source]:
    version = probe.nvml_driver_version()
    if version:
        return version, Source.NVML
    version = probe.nvidia_smi_driver_version()
    if version:
        return version, Source.NVIDIA_SMI
    return None, Source.UNKNOWN


def _sysctl_int(probe: Probe, key: str) -> int | None:
    text = probe.sysctl(key)
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _detect_mps(probe: Probe, notes: list[str]) -> MpsDevice | None:
    if not probe.mps_available():
        if probe.system() == "Darwin":
            notes.append("MPS not available (torch.backends.mps.is_available() is False)")
        return None
    chip = probe.sysctl("machdep.cpu.brand_string")
    memory = _sysctl_int(probe, "hw.memsize")
    try:
        recommended = probe.mps_recommended_max_memory()
    except RuntimeError as exc:
        recommended = None
        notes.append(f"MPS: torch.mps.recommended_max_memory() failed: {exc}")
    else:
        if recommended is None:
            notes.append(
                f"MPS: torch {probe.torch_version()} has no torch.mps.recommended_max_memory(); "
                "the working-set limit Metal recommends is unknown"
            )
    if chip:
        match, match_note = match_catalog(chip, "mps", memory)
    else:
        match, match_note = None, "chip name unknown; described as found"
    return MpsDevice(
        chip=chip,
        chip_source=Source.SYSCTL_BRAND if chip else Source.UNKNOWN,
        unified_memory_bytes=memory,
        unified_memory_source=Source.SYSCTL_MEMSIZE if memory else Source.UNKNOWN,
        recommended_max_memory_bytes=recommended,
        recommended_max_memory_source=(
            Source.TORCH_MPS_RECOMMENDED if recommended is not None else Source.UNKNOWN
        ),
        catalog_match=match,
        match_note=match_note,
    )


def _cpu_model(probe: Probe) -> tuple[str | None, Source]:
    system = probe.system()
    if system == "Darwin":
        brand = probe.sysctl("machdep.cpu.brand_string")
        if brand:
            return brand, Source.SYSCTL_BRAND
    if system == "Linux":
        for line in (probe.cpuinfo() or "").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip(), Source.PROC_CPUINFO
    processor = probe.processor().strip()
    if processor:
        return processor, Source.PLATFORM_PROCESSOR
    return None, Source.UNKNOWN


def _detect_cpu(probe: Probe) -> CpuInfo:
    model, model_source = _cpu_model(probe)
    usable = probe.usable_cpu_count()
    ram = probe.total_ram_bytes()
    match, match_note = match_catalog("cpu", "cpu", None)
    if match:
        match_note = f"catalog row {match!r}: a CPU-only host, its memory this host's RAM"
    return CpuInfo(
        model=model,
        model_source=model_source,
        logical_cores=probe.cpu_count(),
        usable_cores=usable,
        usable_cores_source=Source.SCHED_GETAFFINITY if usable is not None else Source.UNKNOWN,
        total_ram_bytes=ram,
        torch_threads=probe.torch_threads(),
        catalog_match=match,
        match_note=match_note,
    )


def detect_local(probe: Probe | None = None) -> LocalMachine:
    """Describe this machine (or what `probe` reports): GPUs, MPS, CPU and RAM.

    CUDA is initialised only when torch counts at least one GPU; the driver version is looked
    up only then too (NVML, else nvidia-smi, else unknown).
    """
    probe = probe or TorchProbe()
    notes: list[str] = []
    count = probe.cuda_device_count()
    gpus = _detect_cuda(probe, count, notes)
    runtime = probe.cuda_runtime_version()
    if count:
        driver, driver_source = _driver_version(probe)
    else:
        driver, driver_source = None, Source.NOT_PROBED
        notes.append(
            f"no CUDA GPU: torch {probe.torch_version()} is built with CUDA {runtime} "
            "but sees no GPU"
            if runtime
            else f"no CUDA GPU: torch {probe.torch_version()} is built without CUDA"
        )
    mps = _detect_mps(probe, notes)
    cpu = _detect_cpu(probe)
    if cpu.total_ram_bytes is None:
        notes.append("total RAM unknown (neither os.sysconf nor sysctl hw.memsize answered)")
    return LocalMachine(
        torch_version=probe.torch_version(),
        cuda_gpus=gpus,
        cuda_runtime_version=runtime,
        driver_version=driver,
        driver_version_source=driver_source,
        mps=mps,
        cpu=cpu,
        notes=tuple(notes),
    )
