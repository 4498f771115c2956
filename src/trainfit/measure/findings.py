"""What each of the doctor's checks found (`trainfit.measure.doctor`), as typed values: one
value per check, its outcome and the readings its words and its fix name (words:
`trainfit.report.doctor_words`). A reading that raised is carried as its error's own text."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True, kw_only=True, slots=True)
class Wheel:
    """The torch wheel a driver supporting CUDA `driver_cuda` runs: the newest CUDA wheel index
    at or below it (None: older than every index; `driver_cuda` None: any index)."""

    driver_cuda: tuple[int, int] | None
    index: tuple[int, int] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchFound:
    """torch's version (None: unreadable) and the CUDA it is built with."""

    version: str | None
    build: str | None = None
    """`torch.version.cuda` (None: a build without CUDA)."""
    build_error: str | None = None
    """Why `torch.version.cuda` could not be read."""
    mps_built: bool | None = None


class CudaOutcome(str, Enum):
    """Whether torch sees the NVIDIA GPUs the machine has."""

    COUNT_FAILED = "count failed"
    SEEN = "seen"
    CPU_ONLY_BUILD = "cpu-only build"
    """nvidia-smi lists GPUs, torch has no CUDA."""
    HIDDEN = "hidden"
    """CUDA_VISIBLE_DEVICES (`CudaFound.visible`) hides the GPUs nvidia-smi lists."""
    DRIVER_TOO_OLD = "driver too old"
    """The GPUs nvidia-smi lists are unseen, the driver older than the build's CUDA major."""
    NOT_INITIALISED = "not initialised"
    """The GPUs nvidia-smi lists are unseen, CUDA does not initialise."""
    MPS_INSTEAD = "mps instead"
    NO_GPU = "no gpu"


@dataclass(frozen=True, kw_only=True, slots=True)
class CudaFound:
    """What torch saw of the NVIDIA GPUs, with what the outcome names."""

    outcome: CudaOutcome
    count: int = 0
    error: str | None = None
    """Why counting the GPUs failed (`CudaOutcome.COUNT_FAILED`)."""
    version: str | None = None
    """torch's version."""
    build: str | None = None
    """The CUDA torch is built with."""
    smi_gpus: tuple[str, ...] = ()
    """The GPUs nvidia-smi lists."""
    visible: str | None = None
    """CUDA_VISIBLE_DEVICES (`CudaOutcome.HIDDEN`)."""
    wheel: Wheel
    """The wheel the driver runs, for the fix."""


class DriverOutcome(str, Enum):
    """Whether the driver runs the CUDA torch is built with."""

    NO_GPU = "no gpu"
    NO_CUDA_BUILD = "no cuda build"
    CUDA_UNKNOWN = "cuda unknown"
    """Neither NVML nor nvidia-smi said which CUDA the driver supports."""
    TOO_OLD = "too old"
    """The driver's CUDA major is older than the build's."""
    MINOR_COMPAT = "minor compatibility"
    """Same major, older minor: CUDA minor-version compatibility."""
    AGREE = "agree"


@dataclass(frozen=True, kw_only=True, slots=True)
class DriverFound:
    """The driver against the CUDA build, with what the outcome names."""

    outcome: DriverOutcome
    driver: str | None = None
    """The driver's version (None: unknown)."""
    driver_cuda: str | None = None
    """The newest CUDA the driver supports ("13.0")."""
    source: str | None = None
    """Where `driver_cuda` came from ("NVML", "nvidia-smi")."""
    build: str | None = None
    minimum: str | None = None
    """The oldest Linux driver for the build's CUDA major (None: not in the table)."""
    wheel: Wheel | None = None


class MemoryOutcome(str, Enum):
    """A GPU's memory as torch reads it."""

    UNREADABLE = "unreadable"
    """Its properties could not be read."""
    FREE_UNKNOWN = "free unknown"
    BUSY = "busy"
    """Less than `LOW_FREE_FRACTION` of it is free."""
    FREE = "free"


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryFound:
    """One GPU's total and free memory."""

    outcome: MemoryOutcome
    name: str | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None
    error: str | None = None
    """The reading's error (`UNREADABLE`: the properties', `FREE_UNKNOWN`: the free memory's)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class KernelsFound:
    """Whether this torch has kernels for a GPU of compute capability `capability`."""

    has: bool
    name: str | None
    capability: tuple[int, int]
    arch_list: tuple[str, ...]
    wheel: Wheel


class Bf16Outcome(str, Enum):
    """Whether every GPU computes in bf16 natively."""

    NO_GPU = "no gpu"
    LACKING = "lacking"
    """Some GPUs (`Bf16Found.lacking`) have no native bf16."""
    UNKNOWN = "unknown"
    """bf16 support could not be read for every GPU."""
    NATIVE = "native"


@dataclass(frozen=True, kw_only=True, slots=True)
class Bf16Found:
    """bf16 on the GPUs torch sees."""

    outcome: Bf16Outcome
    lacking: tuple[int, ...] = ()
    """The indexes of the GPUs without native bf16."""


class Tf32Outcome(str, Enum):
    """Whether every GPU has TF32 for fp32 matmuls."""

    NO_GPU = "no gpu"
    SUPPORTED = "supported"
    """Every GPU has TF32 (compute capability 8.0 on)."""
    PARTIAL = "partial"


@dataclass(frozen=True, kw_only=True, slots=True)
class Tf32Found:
    """TF32 on the GPUs torch sees, and whether fp32 matmuls use it."""

    outcome: Tf32Outcome
    precision: str | None = None
    """`torch.get_float32_matmul_precision()` (`SUPPORTED`)."""


class NcclOutcome(str, Enum):
    """Whether this torch has NCCL for multi-GPU training."""

    NO_GPU = "no gpu"
    NOT_LINUX = "not linux"
    FOUND = "found"
    VERSION_UNKNOWN = "version unknown"
    MISSING = "missing"


@dataclass(frozen=True, kw_only=True, slots=True)
class NcclFound:
    """NCCL, its version, or why it is missing."""

    outcome: NcclOutcome
    system: str = ""
    version: str | None = None
    error: str | None = None
    """The version's error (`VERSION_UNKNOWN`) or the availability's (`MISSING`)."""


class MpsOutcome(str, Enum):
    """Whether Apple's MPS backend is built into torch and available."""

    NOT_MAC = "not mac"
    AVAILABLE = "available"
    NOT_AVAILABLE = "not available"
    """Built into torch but not available on this macOS or Python."""
    NOT_BUILT = "not built"


@dataclass(frozen=True, kw_only=True, slots=True)
class MpsFound:
    """MPS on this machine (`system`: the OS where it is not a Mac)."""

    outcome: MpsOutcome
    system: str = ""
    mac: str | None = None
    """The macOS version (None: unknown)."""


class FallbackOutcome(str, Enum):
    """PYTORCH_ENABLE_MPS_FALLBACK."""

    NOT_MAC = "not mac"
    UNSET = "unset"
    ON = "on"
    OTHER = "other"
    """Set to a value other than "1" (`FallbackFound.value`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FallbackFound:
    """PYTORCH_ENABLE_MPS_FALLBACK as set in the environment."""

    outcome: FallbackOutcome
    value: str | None = None


class StepOutcome(str, Enum):
    """How the tiny training step on a device ended."""

    RAISED = "raised"
    NOT_FINITE = "not finite"
    UNCHANGED = "unchanged"
    """The optimizer step changed no parameter."""
    TRAINED = "trained"
    NOT_RUN = "not run"
    """The steps were turned off."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepFound:
    """The tiny real training step on one device, with its readings."""

    outcome: StepOutcome
    device: str
    """The torch device: "cpu", "cuda:0", "mps"."""
    error: str | None = None
    bf16_autocast: bool = False
    seconds: float = 0.0
    loss: float = 0.0
    wheel: Wheel
    """The wheel the driver runs, for a CUDA step's fix."""


Finding = (
    TorchFound
    | CudaFound
    | DriverFound
    | MemoryFound
    | KernelsFound
    | Bf16Found
    | Tf32Found
    | NcclFound
    | MpsFound
    | FallbackFound
    | StepFound
)
"""What one check found."""
