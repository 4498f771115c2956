"""The doctor's checks of the NVIDIA stack: torch and its CUDA build, the GPUs torch sees, the
driver against the CUDA build, each GPU's memory and kernels, bf16, TF32 and NCCL; each problem
with what its fix needs (the torch wheel the driver runs, the driver a CUDA build needs), typed
(`trainfit.measure.findings`)."""

from __future__ import annotations

from trainfit.hardware.probe import Probe
from trainfit.measure.diagnosis import (
    CheckLog,
    GpuReport,
    Reading,
    Status,
    parse_version,
    read,
)
from trainfit.measure.findings import (
    Bf16Found,
    Bf16Outcome,
    CudaFound,
    CudaOutcome,
    DriverFound,
    DriverOutcome,
    KernelsFound,
    MemoryFound,
    MemoryOutcome,
    NcclFound,
    NcclOutcome,
    Tf32Found,
    Tf32Outcome,
    TorchFound,
    Wheel,
)

LOW_FREE_FRACTION = 0.75
"""A GPU with less than this share of its memory free is reported as busy (a warning).

NB: an idle H100 shows 99.3% free after this process's own CUDA context; a desktop GPU that
also drives a display shows a few hundred MiB less. Below three quarters, another process is
training or serving on the card, and trainfit's verdicts, which count the whole card, are
optimistic."""


MIN_DRIVER_FOR_CUDA_MAJOR = {11: "450.80.02", 12: "525.60.13", 13: "580"}
"""Oldest Linux driver able to run any CUDA release of a major version.

Source: NVIDIA, "CUDA Compatibility: Minor Version Compatibility", table 1 (CUDA 11.x >= 450,
12.x >= 525, 13.x >= 580), and the CUDA 11.x/12.x release notes for the exact versions; seen
2026-11-27."""


CUDA_WHEEL_INDEXES = ((11, 8), (12, 1), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0))
"""CUDA versions PyTorch has published wheel indexes for (download.pytorch.org/whl/cuXYZ).

NB: not every torch release has every index (2.11 has cu126, cu128 and cu130); the fix names
the newest index the driver can run, and the get-started page lists a release's indexes.
Source: pytorch.org/get-started/previous-versions, seen 2026-11-27."""


def wheel_for(driver_cuda: tuple[int, int] | None) -> Wheel:
    """The newest CUDA build of torch a driver supporting `driver_cuda` runs."""
    fitting = [v for v in CUDA_WHEEL_INDEXES if driver_cuda is None or v <= driver_cuda]
    return Wheel(driver_cuda=driver_cuda, index=fitting[-1] if fitting else None)


def read_driver_cuda(probe: Probe) -> tuple[str | None, str | None]:
    """The driver's CUDA version ("13.0") and where it came from."""
    nvml = read(probe.nvml_cuda_driver_version).value
    if isinstance(nvml, int) and nvml > 0:
        return f"{nvml // 1000}.{(nvml % 1000) // 10}", "NVML"
    smi = read(probe.nvidia_smi_cuda_version).value
    return (smi, "nvidia-smi") if smi else (None, None)


def read_driver_version(probe: Probe) -> str | None:
    return read(probe.nvml_driver_version).value or read(probe.nvidia_smi_driver_version).value


def check_torch(doc: CheckLog, version: str | None, build: Reading, mps_built: bool | None) -> None:
    if version is None:
        doc.add("torch", Status.FAIL, TorchFound(version=None))
        return
    found = TorchFound(
        version=version, build=build.value, build_error=build.error, mps_built=mps_built
    )
    doc.add("torch", Status.OK, found)


def check_cuda(
    doc: CheckLog,
    version: str | None,
    count: Reading,
    build: str | None,
    smi_gpus: tuple[str, ...] | None,
    driver_cuda: str | None,
    mps_available: bool,
) -> None:
    """Whether torch sees the NVIDIA GPUs the machine has."""
    probe = doc.probe
    wheel = wheel_for(parse_version(driver_cuda))
    if count.error:
        found = CudaFound(outcome=CudaOutcome.COUNT_FAILED, error=count.error, wheel=wheel)
        doc.add("cuda", Status.FAIL, found)
        return
    if count.value:
        found = CudaFound(outcome=CudaOutcome.SEEN, count=count.value, wheel=wheel)
        doc.add("cuda", Status.OK, found)
        return
    if smi_gpus:
        if build is None:
            outcome, hidden = CudaOutcome.CPU_ONLY_BUILD, None
        else:
            hidden = read(probe.env, "CUDA_VISIBLE_DEVICES").value
            build_v, driver_v = parse_version(build), parse_version(driver_cuda)
            if hidden is not None:
                outcome = CudaOutcome.HIDDEN
            elif build_v and driver_v and driver_v[0] < build_v[0]:
                outcome = CudaOutcome.DRIVER_TOO_OLD
            else:
                outcome = CudaOutcome.NOT_INITIALISED
        found = CudaFound(
            outcome=outcome,
            version=version,
            build=build,
            smi_gpus=smi_gpus,
            visible=hidden,
            wheel=wheel,
        )
        doc.add("cuda", Status.FAIL, found)
        return
    if mps_available:
        doc.add("cuda", Status.SKIP, CudaFound(outcome=CudaOutcome.MPS_INSTEAD, wheel=wheel))
        return
    doc.add("cuda", Status.WARN, CudaFound(outcome=CudaOutcome.NO_GPU, wheel=wheel))


def check_driver(
    doc: CheckLog,
    gpus_present: bool,
    build: str | None,
    driver: str | None,
    driver_cuda: str | None,
    driver_cuda_source: str | None,
) -> None:
    """Whether the driver can run the CUDA torch was built with."""
    if not gpus_present:
        doc.add("driver", Status.SKIP, DriverFound(outcome=DriverOutcome.NO_GPU))
        return
    if build is None:
        doc.add("driver", Status.SKIP, DriverFound(outcome=DriverOutcome.NO_CUDA_BUILD))
        return
    build_v, driver_v = parse_version(build), parse_version(driver_cuda)
    if driver_v is None or build_v is None:
        found = DriverFound(outcome=DriverOutcome.CUDA_UNKNOWN, driver=driver, build=build)
        doc.add("driver", Status.WARN, found)
        return
    if driver_v[0] < build_v[0]:
        outcome, status = DriverOutcome.TOO_OLD, Status.FAIL
    elif driver_v < build_v:
        outcome, status = DriverOutcome.MINOR_COMPAT, Status.WARN
    else:
        outcome, status = DriverOutcome.AGREE, Status.OK
    found = DriverFound(
        outcome=outcome,
        driver=driver,
        driver_cuda=driver_cuda,
        source=driver_cuda_source,
        build=build,
        minimum=MIN_DRIVER_FOR_CUDA_MAJOR.get(build_v[0]),
        wheel=wheel_for(driver_v),
    )
    doc.add("driver", status, found)


def read_gpus(doc: CheckLog, count: int) -> tuple[GpuReport, ...]:
    gpus = []
    for index in range(count):
        props = read(doc.probe.cuda_properties, index)
        free = read(doc.probe.cuda_free_memory, index)
        bf16 = read(doc.probe.cuda_bf16_supported, index)
        p = props.value
        gpu = GpuReport(
            index=index,
            name=p.name if p else None,
            total_memory_bytes=p.total_memory_bytes if p else None,
            free_memory_bytes=free.value,
            compute_capability=p.compute_capability if p else None,
            bf16=bf16.value,
        )
        gpus.append(gpu)
        _check_memory(doc, gpu, props.error, free.error)
    return tuple(gpus)


def _check_memory(
    doc: CheckLog, gpu: GpuReport, props_error: str | None, free_error: str | None
) -> None:
    name = f"cuda:{gpu.index} memory"
    if props_error or gpu.total_memory_bytes is None:
        found = MemoryFound(outcome=MemoryOutcome.UNREADABLE, error=props_error)
        doc.add(name, Status.FAIL, found)
        return
    total = gpu.total_memory_bytes
    if free_error or gpu.free_memory_bytes is None:
        found = MemoryFound(
            outcome=MemoryOutcome.FREE_UNKNOWN, name=gpu.name, total_bytes=total, error=free_error
        )
        doc.add(name, Status.FAIL, found)
        return
    free = gpu.free_memory_bytes
    busy = free < LOW_FREE_FRACTION * total
    found = MemoryFound(
        outcome=MemoryOutcome.BUSY if busy else MemoryOutcome.FREE,
        name=gpu.name,
        total_bytes=total,
        free_bytes=free,
    )
    doc.add(name, Status.WARN if busy else Status.OK, found)


def _arch(text: str) -> tuple[str, tuple[int, int]] | None:
    """ "sm_90a" -> ("sm", (9, 0)); "compute_120" -> ("compute", (12, 0))."""
    kind, _, digits = text.partition("_")
    digits = digits.rstrip("abcdefghijklmnopqrstuvwxyz")
    if kind not in {"sm", "compute"} or len(digits) < 2 or not digits.isdigit():
        return None
    return kind, (int(digits[:-1]), int(digits[-1]))


def has_kernels(arch_list: tuple[str, ...], cc: tuple[int, int]) -> bool:
    # NB: CUDA binary compatibility: sm_XY code runs on X.Z for Z >= Y; PTX (compute_XY) is
    # compiled by the driver for any later GPU. Arch-specific "a"/"f" suffixes are read as plain.
    for entry in arch_list:
        parsed = _arch(entry)
        if parsed is None:
            continue
        kind, (major, minor) = parsed
        if kind == "sm" and major == cc[0] and minor <= cc[1]:
            return True
        if kind == "compute" and (major, minor) <= cc:
            return True
    return False


def check_kernels(doc: CheckLog, gpus: tuple[GpuReport, ...], wheel: Wheel) -> None:
    arch_list = tuple(read(doc.probe.cuda_arch_list).value or ())
    if not arch_list:
        return
    for gpu in gpus:
        if gpu.compute_capability is None:
            continue
        has = has_kernels(arch_list, gpu.compute_capability)
        found = KernelsFound(
            has=has,
            name=gpu.name,
            capability=gpu.compute_capability,
            arch_list=arch_list,
            wheel=wheel,
        )
        doc.add(f"cuda:{gpu.index} kernels", Status.OK if has else Status.FAIL, found)


def check_bf16(doc: CheckLog, gpus: tuple[GpuReport, ...]) -> None:
    if not gpus:
        doc.add("bf16", Status.SKIP, Bf16Found(outcome=Bf16Outcome.NO_GPU))
        return
    lacking = tuple(g.index for g in gpus if g.bf16 is False)
    unknown = [g for g in gpus if g.bf16 is None]
    if lacking:
        doc.add("bf16", Status.WARN, Bf16Found(outcome=Bf16Outcome.LACKING, lacking=lacking))
    elif unknown:
        doc.add("bf16", Status.WARN, Bf16Found(outcome=Bf16Outcome.UNKNOWN))
    else:
        doc.add("bf16", Status.OK, Bf16Found(outcome=Bf16Outcome.NATIVE))


def check_tf32(doc: CheckLog, gpus: tuple[GpuReport, ...]) -> None:
    ccs = [g.compute_capability for g in gpus if g.compute_capability is not None]
    if not ccs:
        doc.add("tf32", Status.SKIP, Tf32Found(outcome=Tf32Outcome.NO_GPU))
        return
    precision = read(doc.probe.float32_matmul_precision).value
    if all(cc >= (8, 0) for cc in ccs):
        doc.add("tf32", Status.OK, Tf32Found(outcome=Tf32Outcome.SUPPORTED, precision=precision))
    else:
        doc.add("tf32", Status.OK, Tf32Found(outcome=Tf32Outcome.PARTIAL))


def check_nccl(doc: CheckLog, gpus_seen: bool, system: str) -> str | None:
    if not gpus_seen:
        doc.add("nccl", Status.SKIP, NcclFound(outcome=NcclOutcome.NO_GPU))
        return None
    if system != "Linux":
        doc.add("nccl", Status.SKIP, NcclFound(outcome=NcclOutcome.NOT_LINUX, system=system))
        return None
    available = read(doc.probe.nccl_available)
    version = read(doc.probe.nccl_version) if available.value else Reading()
    if available.value and version.value:
        doc.add("nccl", Status.OK, NcclFound(outcome=NcclOutcome.FOUND, version=version.value))
    elif available.value:
        found = NcclFound(outcome=NcclOutcome.VERSION_UNKNOWN, error=version.error)
        doc.add("nccl", Status.WARN, found)
    else:
        doc.add("nccl", Status.WARN, NcclFound(outcome=NcclOutcome.MISSING, error=available.error))
    return version.value


__all__ = [
    "CUDA_WHEEL_INDEXES",
    "LOW_FREE_FRACTION",
    "MIN_DRIVER_FOR_CUDA_MAJOR",
    "check_bf16",
    "check_cuda",
    "check_driver",
    "check_kernels",
    "check_nccl",
    "check_tf32",
    "check_torch",
    "has_kernels",
    "read_driver_cuda",
    "read_driver_version",
    "read_gpus",
    "wheel_for",
]
