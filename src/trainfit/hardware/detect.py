"""What this machine has: CUDA GPUs, Apple MPS, the CPU and RAM, each matched to the catalog.

`detect_local()` reads the host through a `Probe` (`trainfit.hardware.probe`): the real one by
default, a `FakeProbe` in tests. Every reading says where it came from (`Source`), and every
device found is matched to a catalog row through `catalog.get_device` or described as found
with `catalog_match=None` and its `matching` saying why; what could not be read is a typed
note (`DetectNote`). Words: `trainfit.hardware.detect_words`.

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
from dataclasses import dataclass
from enum import Enum

from trainfit.errors import UnknownNameError
from trainfit.hardware.catalog import DeviceKind, get_device
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


class MatchHow(str, Enum):
    """What agreed between a device found and the catalog row it is."""

    NAME = "name"
    """The name (no memory to compare)."""
    NAME_AND_MEMORY = "name and memory"
    CPU_HOST = "cpu host"
    """The CPU row: a CPU-only host, its memory this host's RAM."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Matched:
    """The device is catalog row `row`."""

    row: str
    how: MatchHow


@dataclass(frozen=True, kw_only=True, slots=True)
class OtherKind:
    """Row `row` has the name but is of kind `row_kind`, not the device's `kind`."""

    row: str
    row_kind: DeviceKind
    kind: str


@dataclass(frozen=True, kw_only=True, slots=True)
class OtherMemory:
    """Row `row` has the name but `row_bytes` of memory, the device `found_bytes`."""

    row: str
    row_bytes: int
    found_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Unmatched:
    """No catalog row is the device found as `name` (None: its name is unknown)."""

    name: str | None
    rejected: tuple[OtherKind | OtherMemory, ...] = ()
    """Rows the name found, turned down."""
    close: tuple[str, ...] = ()
    """Else, the rows with the closest names."""


Matching = Matched | Unmatched
"""How a device found was matched to a catalog row, or why it was not."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuUnreadable:
    """torch could not read CUDA GPU `index`'s properties (`error`: its error's text)."""

    index: int
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class FreeMemoryUnknown:
    """CUDA GPU `index`'s free memory could not be read (`error`: its error's text)."""

    index: int
    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NoCudaGpu:
    """torch `torch_version` sees no CUDA GPU (`runtime`: the CUDA it is built with, None for
    a build without CUDA)."""

    torch_version: str
    runtime: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class MpsUnavailable:
    """On a Mac: `torch.backends.mps.is_available()` is False."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MpsLimitFailed:
    """`torch.mps.recommended_max_memory()` raised (`error`: its error's text)."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NoMpsLimit:
    """torch `torch_version` has no `torch.mps.recommended_max_memory()`."""

    torch_version: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RamUnknown:
    """Neither os.sysconf nor sysctl hw.memsize gave the total RAM."""


DetectNote = (
    GpuUnreadable
    | FreeMemoryUnknown
    | NoCudaGpu
    | MpsUnavailable
    | MpsLimitFailed
    | NoMpsLimit
    | RamUnknown
)
"""What detection could not read or did not find."""


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
    matching: Matching


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
    matching: Matching


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
    matching: Matching


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
    notes: tuple[DetectNote, ...]


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


def match_catalog(name: str, kind: str, memory_bytes: int | None) -> tuple[str | None, Matching]:
    """The catalog row a device found as `name` is, and how it was (or was not) matched."""
    rejected: dict[str, OtherKind | OtherMemory] = {}
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
            rejected[device.name] = OtherKind(row=device.name, row_kind=device.kind, kind=kind)
            continue
        if not (memory_bytes and device.memory_bytes):
            return device.name, Matched(row=device.name, how=MatchHow.NAME)
        gap = abs(device.memory_bytes - memory_bytes) / device.memory_bytes
        if gap > MEMORY_TOLERANCE:
            rejected[device.name] = OtherMemory(
                row=device.name, row_bytes=device.memory_bytes, found_bytes=memory_bytes
            )
            continue
        return device.name, Matched(row=device.name, how=MatchHow.NAME_AND_MEMORY)
    return None, Unmatched(
        name=name, rejected=tuple(rejected.values()), close=() if rejected else close
    )


def _detect_cuda(probe: Probe, count: int, notes: list[DetectNote]) -> tuple[CudaGpu, ...]:
    gpus = []
    for index in range(count):
        try:
            props = probe.cuda_properties(index)
        except RuntimeError as exc:
            notes.append(GpuUnreadable(index=index, error=str(exc)))
            continue
        try:
            free: int | None = probe.cuda_free_memory(index)
        except RuntimeError as exc:
            free = None
            notes.append(FreeMemoryUnknown(index=index, error=str(exc)))
        match, matching = match_catalog(props.name, "cuda", props.total_memory_bytes)
        gpus.append(
            CudaGpu(
                index=index,
                name=props.name,
                total_memory_bytes=props.total_memory_bytes,
                free_memory_bytes=free,
                compute_capability=props.compute_capability,
                multiprocessor_count=props.multiprocessor_count,
                catalog_match=match,
                matching=matching,
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


def _detect_mps(probe: Probe, notes: list[DetectNote]) -> MpsDevice | None:
    if not probe.mps_available():
        if probe.system() == "Darwin":
            notes.append(MpsUnavailable())
        return None
    chip = probe.sysctl("machdep.cpu.brand_string")
    memory = _sysctl_int(probe, "hw.memsize")
    try:
        recommended = probe.mps_recommended_max_memory()
    except RuntimeError as exc:
        recommended = None
        notes.append(MpsLimitFailed(error=str(exc)))
    else:
        if recommended is None:
            notes.append(NoMpsLimit(torch_version=probe.torch_version()))
    matching: Matching
    if chip:
        match, matching = match_catalog(chip, "mps", memory)
    else:
        match, matching = None, Unmatched(name=None)
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
        matching=matching,
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
    match, matching = match_catalog("cpu", "cpu", None)
    if match:
        matching = Matched(row=match, how=MatchHow.CPU_HOST)
    return CpuInfo(
        model=model,
        model_source=model_source,
        logical_cores=probe.cpu_count(),
        usable_cores=usable,
        usable_cores_source=Source.SCHED_GETAFFINITY if usable is not None else Source.UNKNOWN,
        total_ram_bytes=ram,
        torch_threads=probe.torch_threads(),
        catalog_match=match,
        matching=matching,
    )


def detect_local(probe: Probe | None = None) -> LocalMachine:
    """Describe this machine (or what `probe` reports): GPUs, MPS, CPU and RAM.

    CUDA is initialised only when torch counts at least one GPU; the driver version is looked
    up only then too (NVML, else nvidia-smi, else unknown).
    """
    probe = probe or TorchProbe()
    notes: list[DetectNote] = []
    count = probe.cuda_device_count()
    gpus = _detect_cuda(probe, count, notes)
    runtime = probe.cuda_runtime_version()
    if count:
        driver, driver_source = _driver_version(probe)
    else:
        driver, driver_source = None, Source.NOT_PROBED
        notes.append(NoCudaGpu(torch_version=probe.torch_version(), runtime=runtime or None))
    mps = _detect_mps(probe, notes)
    cpu = _detect_cpu(probe)
    if cpu.total_ram_bytes is None:
        notes.append(RamUnknown())
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
