"""The doctor's checks of the NVIDIA stack: torch and its CUDA build, the GPUs torch sees, the
driver against the CUDA build, each GPU's memory and kernels, bf16, TF32 and NCCL; each problem
with its fix (the pip command of the torch wheel the driver runs, or what to do to the driver)."""

from __future__ import annotations

from trainfit.hardware.probe import Probe
from trainfit.hardware.units import gib
from trainfit.measure.diagnosis import (
    CheckLog,
    GpuReport,
    Reading,
    Status,
    parse_version,
    read,
    version_text,
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

_WHEEL_URL = "https://download.pytorch.org/whl"
_GET_STARTED = "https://pytorch.org/get-started/previous-versions/"


def wheel_command(driver_cuda: tuple[int, int] | None) -> str:
    """The pip command for the newest CUDA build of torch a driver supporting `driver_cuda` runs."""
    fitting = [v for v in CUDA_WHEEL_INDEXES if driver_cuda is None or v <= driver_cuda]
    if not fitting:
        return (
            f"upgrade the NVIDIA driver: it supports CUDA {version_text(driver_cuda or (0, 0))}, "
            f"older than any torch wheel (CUDA {version_text(CUDA_WHEEL_INDEXES[0])})"
        )
    major, minor = fitting[-1]
    return (
        f"pip install --force-reinstall torch --index-url {_WHEEL_URL}/cu{major}{minor} "
        f"(none for your torch release? {_GET_STARTED} lists each release's indexes)"
    )


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
        doc.add("torch", Status.FAIL, "torch.__version__ could not be read", "reinstall torch")
        return
    parts = [f"torch {version}"]
    if build.error:
        parts.append(f"torch.version.cuda could not be read: {build.error}")
    else:
        parts.append(f"built with CUDA {build.value}" if build.value else "no CUDA in this build")
    if mps_built:
        parts.append("MPS built in")
    doc.add("torch", Status.OK, ", ".join(parts))


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
    wheel = wheel_command(parse_version(driver_cuda))
    if count.error:
        doc.add(
            "cuda",
            Status.FAIL,
            f"torch could not count CUDA GPUs: {count.error}",
            f"check that the NVIDIA driver is loaded (nvidia-smi lists the GPUs); then {wheel}",
        )
        return
    if count.value:
        doc.add("cuda", Status.OK, f"torch sees {count.value} CUDA GPU(s)")
        return
    if smi_gpus:
        seen = f"nvidia-smi sees {len(smi_gpus)} GPU(s): {', '.join(smi_gpus)}"
        if build is None:
            doc.add(
                "cuda",
                Status.FAIL,
                f"torch {version} is a CPU-only build, but {seen}",
                f"install a CUDA build of torch: {wheel}",
            )
            return
        hidden = read(probe.env, "CUDA_VISIBLE_DEVICES").value
        build_v, driver_v = parse_version(build), parse_version(driver_cuda)
        if hidden is not None:
            fix = (
                f"CUDA_VISIBLE_DEVICES={hidden!r} hides them from torch: unset it "
                "or list the GPUs' indexes (CUDA_VISIBLE_DEVICES=0)"
            )
        elif build_v and driver_v and driver_v[0] < build_v[0]:
            fix = f"the driver is too old for CUDA {build}: see the driver check's fix"
        else:
            fix = (
                'CUDA does not initialise: `python -c "import torch; torch.cuda.init()"` says '
                f"why; reinstalling the driver or torch ({wheel}) fixes most cases"
            )
        doc.add(
            "cuda", Status.FAIL, f"torch is built with CUDA {build} but sees no GPU, {seen}", fix
        )
        return
    if mps_available:
        doc.add("cuda", Status.SKIP, "no NVIDIA GPU; MPS is this machine's accelerator")
        return
    doc.add(
        "cuda",
        Status.WARN,
        "no GPU (no CUDA GPU, no MPS): training runs on the CPU",
        "if this machine has an NVIDIA GPU, install its driver until nvidia-smi lists it",
    )


def _driver_fix(build: tuple[int, int], driver: tuple[int, int]) -> str:
    minimum = MIN_DRIVER_FOR_CUDA_MAJOR.get(build[0])
    upgrade = f"upgrade the NVIDIA driver to one supporting CUDA {version_text(build)}" + (
        f" (>= {minimum} on Linux)" if minimum else ""
    )
    return f"{upgrade}, or install torch for the CUDA the driver has: {wheel_command(driver)}"


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
        doc.add("driver", Status.SKIP, "no NVIDIA GPU")
        return
    if build is None:
        doc.add("driver", Status.SKIP, "torch is not built with CUDA")
        return
    name = f"driver {driver or '(version unknown)'}"
    build_v, driver_v = parse_version(build), parse_version(driver_cuda)
    if driver_v is None or build_v is None:
        doc.add(
            "driver",
            Status.WARN,
            f"{name}; the CUDA version it supports is unknown (neither NVML nor nvidia-smi "
            f"said); torch is built with CUDA {build}",
            "pip install nvidia-ml-py (NVML), or put nvidia-smi on PATH",
        )
        return
    said = f"{name} supports CUDA up to {driver_cuda} ({driver_cuda_source}); torch is built "
    said += f"with CUDA {build}"
    if driver_v[0] < build_v[0]:
        doc.add(
            "driver",
            Status.FAIL,
            f"{said}: CUDA {build_v[0]}.x needs a newer driver",
            _driver_fix(build_v, driver_v),
        )
    elif driver_v < build_v:
        doc.add(
            "driver",
            Status.WARN,
            f"{said}: runs through CUDA minor-version compatibility, with features of CUDA "
            f"{build} newer than {driver_cuda} (and PTX JIT) unavailable",
            _driver_fix(build_v, driver_v),
        )
    else:
        doc.add("driver", Status.OK, f"{said}: they agree")


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
        doc.add(
            name,
            Status.FAIL,
            f"torch could not read the GPU's properties: {props_error}",
            "nvidia-smi -q shows the GPU's state; reset or reboot if it reports errors",
        )
        return
    total = gpu.total_memory_bytes
    if free_error or gpu.free_memory_bytes is None:
        doc.add(
            name,
            Status.FAIL,
            f"{gpu.name}, {gib(total)} total; free memory unknown: {free_error}",
            "the GPU is busy, in exclusive-process mode or faulted: nvidia-smi shows its "
            "processes and compute mode",
        )
        return
    free = gpu.free_memory_bytes
    found = f"{gpu.name}, {gib(total)} total, {gib(free)} free"
    if free < LOW_FREE_FRACTION * total:
        doc.add(
            name,
            Status.WARN,
            f"{found}: other processes hold {gib(total - free)} (this process's CUDA context "
            "included)",
            f"stop them (nvidia-smi lists them) or pick another GPU with CUDA_VISIBLE_DEVICES; "
            f"trainfit's verdicts count the whole {gib(total)}, only {gib(free)} is free",
        )
    else:
        doc.add(name, Status.OK, found)


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


def check_kernels(doc: CheckLog, gpus: tuple[GpuReport, ...], wheel: str) -> None:
    arch_list = read(doc.probe.cuda_arch_list).value or ()
    if not arch_list:
        return
    for gpu in gpus:
        if gpu.compute_capability is None:
            continue
        sm = f"sm_{gpu.compute_capability[0]}{gpu.compute_capability[1]}"
        if has_kernels(arch_list, gpu.compute_capability):
            doc.add(f"cuda:{gpu.index} kernels", Status.OK, f"{sm}: this torch has kernels for it")
        else:
            doc.add(
                f"cuda:{gpu.index} kernels",
                Status.FAIL,
                f"{gpu.name} is {sm}; this torch has kernels for {', '.join(arch_list)} only",
                f"install a torch built for {sm}: {wheel}",
            )


def check_bf16(doc: CheckLog, gpus: tuple[GpuReport, ...]) -> None:
    if not gpus:
        doc.add("bf16", Status.SKIP, "no CUDA GPU")
        return
    lacking = [g for g in gpus if g.bf16 is False]
    unknown = [g for g in gpus if g.bf16 is None]
    if lacking:
        names = ", ".join(f"cuda:{g.index}" for g in lacking)
        doc.add(
            "bf16",
            Status.WARN,
            f"no native bf16 on {names} (compute capability below 8.0)",
            "train in fp16 with a GradScaler (--precision fp16) or fp32 on these GPUs",
        )
    elif unknown:
        doc.add("bf16", Status.WARN, "bf16 support could not be read for every GPU")
    else:
        doc.add("bf16", Status.OK, "native bf16 on every GPU")


def check_tf32(doc: CheckLog, gpus: tuple[GpuReport, ...]) -> None:
    ccs = [g.compute_capability for g in gpus if g.compute_capability is not None]
    if not ccs:
        doc.add("tf32", Status.SKIP, "no CUDA GPU")
        return
    precision = read(doc.probe.float32_matmul_precision).value
    if all(cc >= (8, 0) for cc in ccs):
        state = (
            "off for fp32 matmuls (precision 'highest'; torch.set_float32_matmul_precision"
            "('high') turns it on)"
            if precision == "highest"
            else f"on for fp32 matmuls (precision {precision!r})"
        )
        doc.add("tf32", Status.OK, f"supported on every GPU; {state}")
    else:
        doc.add("tf32", Status.OK, "not on every GPU (compute capability below 8.0): fp32 is fp32")


def check_nccl(doc: CheckLog, gpus_seen: bool, system: str) -> str | None:
    if not gpus_seen:
        doc.add("nccl", Status.SKIP, "no CUDA GPU")
        return None
    if system != "Linux":
        doc.add("nccl", Status.SKIP, f"NCCL is Linux-only; torch on {system} uses gloo")
        return None
    available = read(doc.probe.nccl_available)
    version = read(doc.probe.nccl_version) if available.value else Reading()
    if available.value and version.value:
        doc.add("nccl", Status.OK, f"NCCL {version.value}")
    elif available.value:
        doc.add(
            "nccl", Status.WARN, f"NCCL is available but its version is unknown: {version.error}"
        )
    else:
        doc.add(
            "nccl",
            Status.WARN,
            "this torch has no NCCL"
            + (f" ({available.error})" if available.error else "")
            + ": multi-GPU training (DDP, FSDP) has only gloo",
            "install the Linux CUDA wheel of torch, which bundles NCCL",
        )
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
    "wheel_command",
]
