"""`diagnose()`: does this machine's training stack work, and if not, what to do about it.

Replaces the hand verification steps of a setup guide (`nvidia-smi`, `torch.cuda.is_available()`,
`torch.backends.mps.is_available()`, "driver >= 530 for CUDA 12.1"): torch, CUDA and driver
versions and whether they agree; each GPU with its total and free memory and whether this torch
has kernels for it; MPS and its CPU fallback; bf16, TF32 and NCCL; and a tiny real training step
on every device (CPU always, each CUDA GPU, MPS). Each problem comes with its fix.

Every reading goes through a `Probe` (`trainfit.hardware.probe`): `TorchProbe` by default, a
`FakeProbe` in tests. `diagnose` never raises for the environment: a reading that raises becomes
a failed check carrying the error's message. A `Diagnosis` is `ok` when no check failed;
warnings (no GPU, a busy GPU, the MPS fallback unset) do not fail it.

Known limitations:
- "Other processes hold X GiB" is total minus free as `torch.cuda.mem_get_info` reports it
  after creating this process's CUDA context, so X includes that context (about 0.5 GiB on an
  H100 with torch 2.11; see `trainfit.hardware.detect`).
- The driver/CUDA agreement is judged on versions alone (NVIDIA's minor-version-compatibility
  rule); a driver that is new enough but broken shows up in the tiny step instead.
- Only NVIDIA drivers are checked; a ROCm torch (GPUs but no `torch.version.cuda`) skips the
  driver check.
- The MPS step runs in fp32: bf16 on MPS depends on the macOS release, which is not modelled.
- The MPS paths are written against `FakeProbe` only: they have never run on a Mac.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from trainfit.hardware.probe import Probe, StepReading, TorchProbe

GiB = 1 << 30

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

MPS_MACOS_NOTE = (
    "MPS needs a Mac with Apple silicon and, for torch 2.11, macOS 14.0 or later (12.3 for the "
    "first MPS releases); an x86_64 Python running under Rosetta cannot use it either"
)
"""Source: Apple, "Accelerated PyTorch training on Mac" (developer.apple.com/metal/pytorch) and
the PyTorch MPS notes; seen 2026-11-27."""

_WHEEL_URL = "https://download.pytorch.org/whl"
_GET_STARTED = "https://pytorch.org/get-started/previous-versions/"


class Status(str, Enum):
    """The outcome of one check. Only FAIL makes a diagnosis not ok."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    """One thing the doctor looked at."""

    name: str
    """What was checked: "torch", "cuda", "driver", "cuda:0 memory", "step cpu" ..."""
    status: Status
    detail: str
    """What was found, with the numbers."""
    fix: str | None = None
    """What to do about a warning or a failure; None when there is nothing to do."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuReport:
    """One CUDA GPU as the doctor read it; None where a reading failed."""

    index: int
    name: str | None
    total_memory_bytes: int | None
    free_memory_bytes: int | None
    compute_capability: tuple[int, int] | None
    bf16: bool | None
    """Native bf16 (`torch.cuda.is_bf16_supported(including_emulation=False)`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Diagnosis:
    """Everything `diagnose` found: the readings, the steps run and the checks."""

    torch_version: str | None
    cuda_build: str | None
    """The CUDA version torch was built with (`torch.version.cuda`); None on a CPU-only build."""
    driver_version: str | None
    driver_cuda_version: str | None
    """The newest CUDA the driver supports ("13.0"), from NVML or nvidia-smi."""
    gpus: tuple[GpuReport, ...]
    mps_built: bool | None
    mps_available: bool | None
    mps_fallback: str | None
    """PYTORCH_ENABLE_MPS_FALLBACK as set in the environment, None when unset."""
    nccl_version: str | None
    steps: tuple[StepReading, ...]
    """The tiny training steps that returned (failed ones are only in `checks`)."""
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """No check failed (warnings and skips do not count)."""
        return all(c.status is not Status.FAIL for c in self.checks)

    def count(self, status: Status) -> int:
        """How many checks ended with `status`."""
        return sum(c.status is status for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields, statuses as their text, plus "ok"."""
        out = _plain(asdict(self))
        out["ok"] = self.ok
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NB: JSON has no NaN or inf
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class _Reading:
    """A probe reading: its value, or the error it raised."""

    value: Any = None
    error: str | None = None


def _read(fn: Callable[..., Any], *args: Any) -> _Reading:
    # NB: the doctor's job is to report a broken environment, so any exception a reading
    # raises (RuntimeError from torch, OSError, an NVML or import error) becomes data.
    try:
        return _Reading(value=fn(*args))
    except Exception as exc:
        return _Reading(error=f"{type(exc).__name__}: {exc}")


def _version(text: str | None) -> tuple[int, int] | None:
    """ "12.8" -> (12, 8); None for None or text that is not MAJOR.MINOR."""
    if not text:
        return None
    major, _, rest = text.partition(".")
    minor = rest.split(".")[0]
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def _vtext(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _gib(n: int) -> str:
    return f"{n / GiB:.2f} GiB"


def wheel_command(driver_cuda: tuple[int, int] | None) -> str:
    """The pip command for the newest CUDA build of torch a driver supporting `driver_cuda` runs."""
    fitting = [v for v in CUDA_WHEEL_INDEXES if driver_cuda is None or v <= driver_cuda]
    if not fitting:
        return (
            f"upgrade the NVIDIA driver: it supports CUDA {_vtext(driver_cuda or (0, 0))}, "
            f"older than any torch wheel (CUDA {_vtext(CUDA_WHEEL_INDEXES[0])})"
        )
    major, minor = fitting[-1]
    return (
        f"pip install --force-reinstall torch --index-url {_WHEEL_URL}/cu{major}{minor} "
        f"(none for your torch release? {_GET_STARTED} lists each release's indexes)"
    )


@dataclass(kw_only=True)
class _Doctor:
    """The probe the checks read from, and the checks in the order they were made."""

    probe: Probe
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, status: Status, detail: str, fix: str | None = None) -> None:
        self.checks.append(Check(name=name, status=status, detail=detail, fix=fix))


def _driver_cuda(probe: Probe) -> tuple[str | None, str | None]:
    """The driver's CUDA version ("13.0") and where it came from."""
    nvml = _read(probe.nvml_cuda_driver_version).value
    if isinstance(nvml, int) and nvml > 0:
        return f"{nvml // 1000}.{(nvml % 1000) // 10}", "NVML"
    smi = _read(probe.nvidia_smi_cuda_version).value
    return (smi, "nvidia-smi") if smi else (None, None)


def _driver_version(probe: Probe) -> str | None:
    return _read(probe.nvml_driver_version).value or _read(probe.nvidia_smi_driver_version).value


def _check_torch(
    doc: _Doctor, version: str | None, build: _Reading, mps_built: bool | None
) -> None:
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


def _check_cuda(
    doc: _Doctor,
    version: str | None,
    count: _Reading,
    build: str | None,
    smi_gpus: tuple[str, ...] | None,
    driver_cuda: str | None,
    mps_available: bool,
) -> None:
    """Whether torch sees the NVIDIA GPUs the machine has."""
    probe = doc.probe
    wheel = wheel_command(_version(driver_cuda))
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
        hidden = _read(probe.env, "CUDA_VISIBLE_DEVICES").value
        build_v, driver_v = _version(build), _version(driver_cuda)
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
    upgrade = f"upgrade the NVIDIA driver to one supporting CUDA {_vtext(build)}" + (
        f" (>= {minimum} on Linux)" if minimum else ""
    )
    return f"{upgrade}, or install torch for the CUDA the driver has: {wheel_command(driver)}"


def _check_driver(
    doc: _Doctor,
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
    build_v, driver_v = _version(build), _version(driver_cuda)
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


def _read_gpus(doc: _Doctor, count: int) -> tuple[GpuReport, ...]:
    gpus = []
    for index in range(count):
        props = _read(doc.probe.cuda_properties, index)
        free = _read(doc.probe.cuda_free_memory, index)
        bf16 = _read(doc.probe.cuda_bf16_supported, index)
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
    doc: _Doctor, gpu: GpuReport, props_error: str | None, free_error: str | None
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
            f"{gpu.name}, {_gib(total)} total; free memory unknown: {free_error}",
            "the GPU is busy, in exclusive-process mode or faulted: nvidia-smi shows its "
            "processes and compute mode",
        )
        return
    free = gpu.free_memory_bytes
    found = f"{gpu.name}, {_gib(total)} total, {_gib(free)} free"
    if free < LOW_FREE_FRACTION * total:
        doc.add(
            name,
            Status.WARN,
            f"{found}: other processes hold {_gib(total - free)} (this process's CUDA context "
            "included)",
            f"stop them (nvidia-smi lists them) or pick another GPU with CUDA_VISIBLE_DEVICES; "
            f"trainfit's verdicts count the whole {_gib(total)}, only {_gib(free)} is free",
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


def _check_kernels(doc: _Doctor, gpus: tuple[GpuReport, ...], wheel: str) -> None:
    arch_list = _read(doc.probe.cuda_arch_list).value or ()
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


def _check_mps(doc: _Doctor, system: str, built: bool | None, available: bool | None) -> None:
    if system != "Darwin":
        doc.add("mps", Status.SKIP, f"not a Mac ({system})")
        return
    mac = _read(doc.probe.mac_version).value
    on = f"macOS {mac}" if mac else "macOS (version unknown)"
    if available:
        doc.add("mps", Status.OK, f"MPS available ({on})")
    elif built:
        doc.add(
            "mps",
            Status.WARN,
            f"MPS is built into torch but not available on this {on}: training runs on the CPU",
            f"{MPS_MACOS_NOTE}: update macOS, or use an arm64 Python",
        )
    else:
        doc.add(
            "mps",
            Status.WARN,
            f"this torch has no MPS backend ({on}): training runs on the CPU",
            "pip install --force-reinstall torch (the macOS arm64 wheel has MPS)",
        )


def _check_mps_fallback(doc: _Doctor, system: str, value: str | None) -> None:
    if system != "Darwin":
        doc.add("mps fallback", Status.SKIP, "not a Mac")
        return
    how = (
        "export PYTORCH_ENABLE_MPS_FALLBACK=1 before Python starts (in the shell or the job "
        "script; setting os.environ after importing torch is too late)"
    )
    if value is None:
        doc.add(
            "mps fallback",
            Status.WARN,
            "PYTORCH_ENABLE_MPS_FALLBACK is unset: an op MPS lacks raises NotImplementedError "
            "instead of running on the CPU",
            f"{how}; such ops then run on the CPU (slower, with a UserWarning)",
        )
    elif value == "1":
        doc.add(
            "mps fallback",
            Status.OK,
            "PYTORCH_ENABLE_MPS_FALLBACK=1: ops MPS lacks run on the CPU (slower)",
        )
    else:
        doc.add(
            "mps fallback",
            Status.WARN,
            f"PYTORCH_ENABLE_MPS_FALLBACK={value!r}: only '1' turns the CPU fallback on",
            how,
        )


def _check_bf16(doc: _Doctor, gpus: tuple[GpuReport, ...]) -> None:
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


def _check_tf32(doc: _Doctor, gpus: tuple[GpuReport, ...]) -> None:
    ccs = [g.compute_capability for g in gpus if g.compute_capability is not None]
    if not ccs:
        doc.add("tf32", Status.SKIP, "no CUDA GPU")
        return
    precision = _read(doc.probe.float32_matmul_precision).value
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


def _check_nccl(doc: _Doctor, gpus_seen: bool, system: str) -> str | None:
    if not gpus_seen:
        doc.add("nccl", Status.SKIP, "no CUDA GPU")
        return None
    if system != "Linux":
        doc.add("nccl", Status.SKIP, f"NCCL is Linux-only; torch on {system} uses gloo")
        return None
    available = _read(doc.probe.nccl_available)
    version = _read(doc.probe.nccl_version) if available.value else _Reading()
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


def _check_step(doc: _Doctor, device: str, bf16: bool, wheel: str) -> StepReading | None:
    name = f"step {device}"
    kind = device.split(":")[0]
    fixes = {
        "cpu": "torch itself is broken here: pip install --force-reinstall torch",
        "cuda": f"the GPU stack cannot train: see the cuda, driver and kernels checks; {wheel}",
        "mps": f"the MPS stack cannot train: update macOS and torch ({MPS_MACOS_NOTE})",
    }
    got = _read(doc.probe.tiny_train_step, device, bf16)
    step: StepReading | None = got.value
    if step is None:
        doc.add(name, Status.FAIL, f"the tiny training step raised {got.error}", fixes[kind])
        return None
    how = "bf16 autocast" if step.bf16_autocast else "fp32"
    ran = f"MLP forward+backward+AdamW, {how}, {step.seconds * 1e3:.1f} ms"
    if not math.isfinite(step.loss):
        doc.add(name, Status.FAIL, f"{ran}: loss is {step.loss}", fixes[kind])
    elif not step.params_changed:
        doc.add(name, Status.FAIL, f"{ran}: the optimizer step changed no parameter", fixes[kind])
    else:
        doc.add(name, Status.OK, f"{ran}: loss {step.loss:.4f} finite, parameters updated")
    return step


def diagnose(probe: Probe | None = None, *, run_steps: bool = True) -> Diagnosis:
    """Check this machine's training stack (or what `probe` reports); never raises for it.

    `run_steps=False` skips the tiny training steps (their checks say so). CUDA is initialised
    only when torch counts a GPU; free memory is read before any step runs.
    """
    probe = probe or TorchProbe()
    doc = _Doctor(probe=probe)
    version = _read(probe.torch_version).value
    build = _read(probe.cuda_runtime_version)
    system = _read(probe.system).value or "unknown"
    mps_built = _read(probe.mps_built).value
    mps_available = _read(probe.mps_available).value
    count = _read(probe.cuda_device_count)
    n_gpus = count.value or 0
    smi_gpus = None if n_gpus else _read(probe.nvidia_smi_gpus).value
    gpus_present = bool(n_gpus or smi_gpus)
    driver = _driver_version(probe) if gpus_present else None
    driver_cuda, driver_cuda_source = _driver_cuda(probe) if gpus_present else (None, None)
    wheel = wheel_command(_version(driver_cuda))

    _check_torch(doc, version, build, mps_built)
    _check_cuda(doc, version, count, build.value, smi_gpus, driver_cuda, bool(mps_available))
    _check_driver(doc, gpus_present, build.value, driver, driver_cuda, driver_cuda_source)
    gpus = _read_gpus(doc, n_gpus)
    _check_kernels(doc, gpus, wheel)
    _check_mps(doc, system, mps_built, mps_available)
    fallback = _read(probe.env, "PYTORCH_ENABLE_MPS_FALLBACK").value
    _check_mps_fallback(doc, system, fallback)
    _check_bf16(doc, gpus)
    _check_tf32(doc, gpus)
    nccl = _check_nccl(doc, bool(n_gpus), system)

    devices = [("cpu", False)]
    devices += [(f"cuda:{g.index}", bool(g.bf16)) for g in gpus]
    if mps_available:
        devices.append(("mps", False))
    steps = []
    for device, bf16 in devices:
        if not run_steps:
            doc.add(
                f"step {device}", Status.SKIP, "not run: the tiny training steps were turned off"
            )
            continue
        step = _check_step(doc, device, bf16, wheel)
        if step is not None:
            steps.append(step)
    return Diagnosis(
        torch_version=version,
        cuda_build=build.value,
        driver_version=driver,
        driver_cuda_version=driver_cuda,
        gpus=gpus,
        mps_built=mps_built,
        mps_available=mps_available,
        mps_fallback=fallback,
        nccl_version=nccl,
        steps=tuple(steps),
        checks=tuple(doc.checks),
    )
