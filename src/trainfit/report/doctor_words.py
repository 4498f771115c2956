"""What each of the doctor's checks found, and its fix, in words (`trainfit.measure.findings`):
for `trainfit doctor`'s table, its fixes and its JSON."""

from __future__ import annotations

from trainfit.hardware.units import gib
from trainfit.measure.cuda_stack import CUDA_WHEEL_INDEXES
from trainfit.measure.diagnosis import parse_version, version_text
from trainfit.measure.findings import (
    Bf16Found,
    Bf16Outcome,
    CudaFound,
    CudaOutcome,
    DriverFound,
    DriverOutcome,
    FallbackFound,
    FallbackOutcome,
    Finding,
    KernelsFound,
    MemoryFound,
    MemoryOutcome,
    MpsFound,
    MpsOutcome,
    NcclFound,
    NcclOutcome,
    StepFound,
    StepOutcome,
    Tf32Found,
    Tf32Outcome,
    TorchFound,
    Wheel,
)

MPS_MACOS_NOTE = (
    "MPS needs a Mac with Apple silicon and, for torch 2.11, macOS 14.0 or later (12.3 for the "
    "first MPS releases); an x86_64 Python running under Rosetta cannot use it either"
)
"""Source: Apple, "Accelerated PyTorch training on Mac" (developer.apple.com/metal/pytorch) and
the PyTorch MPS notes; seen 2026-11-27."""

_WHEEL_URL = "https://download.pytorch.org/whl"
_GET_STARTED = "https://pytorch.org/get-started/previous-versions/"
_FALLBACK_HOW = (
    "export PYTORCH_ENABLE_MPS_FALLBACK=1 before Python starts (in the shell or the job "
    "script; setting os.environ after importing torch is too late)"
)


def wheel_text(wheel: Wheel) -> str:
    """The pip command of the torch wheel a driver runs, or the driver upgrade it needs."""
    if wheel.index is None:
        return (
            f"upgrade the NVIDIA driver: it supports CUDA "
            f"{version_text(wheel.driver_cuda or (0, 0))}, older than any torch wheel (CUDA "
            f"{version_text(CUDA_WHEEL_INDEXES[0])})"
        )
    major, minor = wheel.index
    return (
        f"pip install --force-reinstall torch --index-url {_WHEEL_URL}/cu{major}{minor} "
        f"(none for your torch release? {_GET_STARTED} lists each release's indexes)"
    )


def found_text(found: Finding) -> str:
    """What a check found, with the numbers, in words."""
    if isinstance(found, TorchFound):
        return _torch(found)
    if isinstance(found, CudaFound):
        return _cuda(found)
    if isinstance(found, DriverFound):
        return _driver(found)
    if isinstance(found, MemoryFound):
        return _memory(found)
    if isinstance(found, KernelsFound):
        sm = _sm(found.capability)
        if found.has:
            return f"{sm}: this torch has kernels for it"
        return f"{found.name} is {sm}; this torch has kernels for {', '.join(found.arch_list)} only"
    if isinstance(found, Bf16Found):
        return _bf16(found)
    if isinstance(found, Tf32Found):
        return _tf32(found)
    if isinstance(found, NcclFound):
        return _nccl(found)
    if isinstance(found, MpsFound):
        return _mps(found)
    if isinstance(found, FallbackFound):
        return _fallback(found)
    return _step(found)


def fix_text(found: Finding) -> str | None:
    """What to do about what a check found (None: nothing to do)."""
    if isinstance(found, TorchFound):
        return "reinstall torch" if found.version is None else None
    if isinstance(found, CudaFound):
        return _cuda_fix(found)
    if isinstance(found, DriverFound):
        return _driver_fix(found)
    if isinstance(found, MemoryFound):
        return _memory_fix(found)
    if isinstance(found, KernelsFound):
        if found.has:
            return None
        return f"install a torch built for {_sm(found.capability)}: {wheel_text(found.wheel)}"
    if isinstance(found, Bf16Found):
        if found.outcome is not Bf16Outcome.LACKING:
            return None
        return "train in fp16 with a GradScaler (--precision fp16) or fp32 on these GPUs"
    if isinstance(found, Tf32Found):
        return None
    if isinstance(found, NcclFound):
        if found.outcome is not NcclOutcome.MISSING:
            return None
        return "install the Linux CUDA wheel of torch, which bundles NCCL"
    if isinstance(found, MpsFound):
        return {
            MpsOutcome.NOT_AVAILABLE: f"{MPS_MACOS_NOTE}: update macOS, or use an arm64 Python",
            MpsOutcome.NOT_BUILT: (
                "pip install --force-reinstall torch (the macOS arm64 wheel has MPS)"
            ),
        }.get(found.outcome)
    if isinstance(found, FallbackFound):
        return {
            FallbackOutcome.UNSET: (
                f"{_FALLBACK_HOW}; such ops then run on the CPU (slower, with a UserWarning)"
            ),
            FallbackOutcome.OTHER: _FALLBACK_HOW,
        }.get(found.outcome)
    return _step_fix(found)


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def _torch(found: TorchFound) -> str:
    if found.version is None:
        return "torch.__version__ could not be read"
    parts = [f"torch {found.version}"]
    if found.build_error:
        parts.append(f"torch.version.cuda could not be read: {found.build_error}")
    else:
        parts.append(f"built with CUDA {found.build}" if found.build else "no CUDA in this build")
    if found.mps_built:
        parts.append("MPS built in")
    return ", ".join(parts)


def _cuda(found: CudaFound) -> str:
    outcome = found.outcome
    if outcome is CudaOutcome.COUNT_FAILED:
        return f"torch could not count CUDA GPUs: {found.error}"
    if outcome is CudaOutcome.SEEN:
        return f"torch sees {found.count} CUDA GPU(s)"
    if outcome is CudaOutcome.MPS_INSTEAD:
        return "no NVIDIA GPU; MPS is this machine's accelerator"
    if outcome is CudaOutcome.NO_GPU:
        return "no GPU (no CUDA GPU, no MPS): training runs on the CPU"
    seen = f"nvidia-smi sees {len(found.smi_gpus)} GPU(s): {', '.join(found.smi_gpus)}"
    if outcome is CudaOutcome.CPU_ONLY_BUILD:
        return f"torch {found.version} is a CPU-only build, but {seen}"
    return f"torch is built with CUDA {found.build} but sees no GPU, {seen}"


def _cuda_fix(found: CudaFound) -> str | None:
    outcome = found.outcome
    if outcome is CudaOutcome.NO_GPU:
        return "if this machine has an NVIDIA GPU, install its driver until nvidia-smi lists it"
    if outcome in (CudaOutcome.SEEN, CudaOutcome.MPS_INSTEAD):
        return None
    if outcome is CudaOutcome.HIDDEN:
        return (
            f"CUDA_VISIBLE_DEVICES={found.visible!r} hides them from torch: unset it "
            "or list the GPUs' indexes (CUDA_VISIBLE_DEVICES=0)"
        )
    if outcome is CudaOutcome.DRIVER_TOO_OLD:
        return f"the driver is too old for CUDA {found.build}: see the driver check's fix"
    wheel = wheel_text(found.wheel)
    if outcome is CudaOutcome.COUNT_FAILED:
        return f"check that the NVIDIA driver is loaded (nvidia-smi lists the GPUs); then {wheel}"
    if outcome is CudaOutcome.CPU_ONLY_BUILD:
        return f"install a CUDA build of torch: {wheel}"
    return (
        'CUDA does not initialise: `python -c "import torch; torch.cuda.init()"` says '
        f"why; reinstalling the driver or torch ({wheel}) fixes most cases"
    )


def _driver(found: DriverFound) -> str:
    outcome = found.outcome
    if outcome is DriverOutcome.NO_GPU:
        return "no NVIDIA GPU"
    if outcome is DriverOutcome.NO_CUDA_BUILD:
        return "torch is not built with CUDA"
    name = f"driver {found.driver or '(version unknown)'}"
    if outcome is DriverOutcome.CUDA_UNKNOWN:
        return (
            f"{name}; the CUDA version it supports is unknown (neither NVML nor nvidia-smi "
            f"said); torch is built with CUDA {found.build}"
        )
    said = (
        f"{name} supports CUDA up to {found.driver_cuda} ({found.source}); torch is built "
        f"with CUDA {found.build}"
    )
    if outcome is DriverOutcome.TOO_OLD:
        return f"{said}: CUDA {_build(found)[0]}.x needs a newer driver"
    if outcome is DriverOutcome.MINOR_COMPAT:
        return (
            f"{said}: runs through CUDA minor-version compatibility, with features of CUDA "
            f"{found.build} newer than {found.driver_cuda} (and PTX JIT) unavailable"
        )
    return f"{said}: they agree"


def _driver_fix(found: DriverFound) -> str | None:
    if found.outcome is DriverOutcome.CUDA_UNKNOWN:
        return "pip install nvidia-ml-py (NVML), or put nvidia-smi on PATH"
    if found.outcome not in (DriverOutcome.TOO_OLD, DriverOutcome.MINOR_COMPAT):
        return None
    assert found.wheel is not None
    build = version_text(_build(found))
    upgrade = f"upgrade the NVIDIA driver to one supporting CUDA {build}" + (
        f" (>= {found.minimum} on Linux)" if found.minimum else ""
    )
    return f"{upgrade}, or install torch for the CUDA the driver has: {wheel_text(found.wheel)}"


def _build(found: DriverFound) -> tuple[int, int]:
    """The CUDA build as (major, minor): known wherever the driver's CUDA was compared."""
    build = parse_version(found.build)
    assert build is not None
    return build


def _memory(found: MemoryFound) -> str:
    outcome = found.outcome
    if outcome is MemoryOutcome.UNREADABLE:
        return f"torch could not read the GPU's properties: {found.error}"
    total = gib(found.total_bytes or 0)
    if outcome is MemoryOutcome.FREE_UNKNOWN:
        return f"{found.name}, {total} total; free memory unknown: {found.error}"
    text = f"{found.name}, {total} total, {gib(found.free_bytes or 0)} free"
    if outcome is MemoryOutcome.FREE:
        return text
    held = (found.total_bytes or 0) - (found.free_bytes or 0)
    return f"{text}: other processes hold {gib(held)} (this process's CUDA context included)"


def _memory_fix(found: MemoryFound) -> str | None:
    if found.outcome is MemoryOutcome.UNREADABLE:
        return "nvidia-smi -q shows the GPU's state; reset or reboot if it reports errors"
    if found.outcome is MemoryOutcome.FREE_UNKNOWN:
        return (
            "the GPU is busy, in exclusive-process mode or faulted: nvidia-smi shows its "
            "processes and compute mode"
        )
    if found.outcome is MemoryOutcome.FREE:
        return None
    return (
        "stop them (nvidia-smi lists them) or pick another GPU with CUDA_VISIBLE_DEVICES; "
        f"trainfit's verdicts count the whole {gib(found.total_bytes or 0)}, only "
        f"{gib(found.free_bytes or 0)} is free"
    )


def _bf16(found: Bf16Found) -> str:
    if found.outcome is Bf16Outcome.LACKING:
        names = ", ".join(f"cuda:{i}" for i in found.lacking)
        return f"no native bf16 on {names} (compute capability below 8.0)"
    return {
        Bf16Outcome.NO_GPU: "no CUDA GPU",
        Bf16Outcome.UNKNOWN: "bf16 support could not be read for every GPU",
        Bf16Outcome.NATIVE: "native bf16 on every GPU",
    }[found.outcome]


def _tf32(found: Tf32Found) -> str:
    if found.outcome is Tf32Outcome.NO_GPU:
        return "no CUDA GPU"
    if found.outcome is Tf32Outcome.PARTIAL:
        return "not on every GPU (compute capability below 8.0): fp32 is fp32"
    state = (
        "off for fp32 matmuls (precision 'highest'; torch.set_float32_matmul_precision"
        "('high') turns it on)"
        if found.precision == "highest"
        else f"on for fp32 matmuls (precision {found.precision!r})"
    )
    return f"supported on every GPU; {state}"


def _nccl(found: NcclFound) -> str:
    outcome = found.outcome
    if outcome is NcclOutcome.NO_GPU:
        return "no CUDA GPU"
    if outcome is NcclOutcome.NOT_LINUX:
        return f"NCCL is Linux-only; torch on {found.system} uses gloo"
    if outcome is NcclOutcome.FOUND:
        return f"NCCL {found.version}"
    if outcome is NcclOutcome.VERSION_UNKNOWN:
        return f"NCCL is available but its version is unknown: {found.error}"
    return (
        "this torch has no NCCL"
        + (f" ({found.error})" if found.error else "")
        + ": multi-GPU training (DDP, FSDP) has only gloo"
    )


def _mps(found: MpsFound) -> str:
    if found.outcome is MpsOutcome.NOT_MAC:
        return f"not a Mac ({found.system})"
    on = f"macOS {found.mac}" if found.mac else "macOS (version unknown)"
    if found.outcome is MpsOutcome.AVAILABLE:
        return f"MPS available ({on})"
    if found.outcome is MpsOutcome.NOT_AVAILABLE:
        return f"MPS is built into torch but not available on this {on}: training runs on the CPU"
    return f"this torch has no MPS backend ({on}): training runs on the CPU"


def _fallback(found: FallbackFound) -> str:
    return {
        FallbackOutcome.NOT_MAC: "not a Mac",
        FallbackOutcome.UNSET: (
            "PYTORCH_ENABLE_MPS_FALLBACK is unset: an op MPS lacks raises NotImplementedError "
            "instead of running on the CPU"
        ),
        FallbackOutcome.ON: "PYTORCH_ENABLE_MPS_FALLBACK=1: ops MPS lacks run on the CPU (slower)",
        FallbackOutcome.OTHER: (
            f"PYTORCH_ENABLE_MPS_FALLBACK={found.value!r}: only '1' turns the CPU fallback on"
        ),
    }[found.outcome]


def _step(found: StepFound) -> str:
    if found.outcome is StepOutcome.NOT_RUN:
        return "not run: the tiny training steps were turned off"
    if found.outcome is StepOutcome.RAISED:
        return f"the tiny training step raised {found.error}"
    how = "bf16 autocast" if found.bf16_autocast else "fp32"
    ran = f"MLP forward+backward+AdamW, {how}, {found.seconds * 1e3:.1f} ms"
    if found.outcome is StepOutcome.NOT_FINITE:
        return f"{ran}: loss is {found.loss}"
    if found.outcome is StepOutcome.UNCHANGED:
        return f"{ran}: the optimizer step changed no parameter"
    return f"{ran}: loss {found.loss:.4f} finite, parameters updated"


def _step_fix(found: StepFound) -> str | None:
    if found.outcome in (StepOutcome.TRAINED, StepOutcome.NOT_RUN):
        return None
    kind = found.device.split(":")[0]
    if kind == "cpu":
        return "torch itself is broken here: pip install --force-reinstall torch"
    if kind == "mps":
        return f"the MPS stack cannot train: update macOS and torch ({MPS_MACOS_NOTE})"
    return (
        "the GPU stack cannot train: see the cuda, driver and kernels checks; "
        f"{wheel_text(found.wheel)}"
    )
