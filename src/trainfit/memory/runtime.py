"""Device memory the CUDA runtime holds outside PyTorch's tensors.

Two parts, both calibrated on an NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0,
torch 2.11.0+cu130) and recorded in benchmarks/accuracy/results/measured_h100.json:

- cuBLAS workspaces, allocated *through* the caching allocator (so they count in allocated and
  reserved memory): one per cuBLAS handle, and PyTorch keeps one handle per host thread, so a
  training step has two, the main thread's (forward, optimizer) and the autograd thread's
  (backward). Size from PyTorch's CublasHandlePool.cpp: 32 MiB on sm90+, else 8 MiB + 128 KiB;
  on the H100 the allocator trace shows exactly two 32 MiB blocks per step.
- the runtime context, outside the allocator (total - free - reserved): the CUDA context,
  kernels loaded lazily, and library handles.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainfit.errors import TrainfitError, UnknownNameError
from trainfit.hardware.catalog import Device
from trainfit.hardware.units import GIB

MiB = 1 << 20


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeProfile:
    """Context sizes of one GPU/driver/library family."""

    name: str
    base_context_bytes: int
    """Context after cuBLAS served fp32 work."""
    reduced_precision_extra_bytes: int
    """Added once fp16/bf16 cuBLAS(Lt) kernels are loaded."""
    no_cublas_saving_bytes: int
    """Not held when the step never calls cuBLAS (convolution-only models)."""
    backward_cublas_bytes: int
    """Held by the autograd thread's cuBLAS handle: not held when backward never calls cuBLAS
    (a matmul only on a path without gradients, as in a VQ codebook search)."""
    measured: bool
    """True when measured on this family; False when carried over from another."""
    source: str
    per_sm_bytes: int = 0
    """Added per streaming multiprocessor of the device (its local memory and the like): the
    device's `sm_count` then decides the context, `base_context_bytes` is the fixed part."""
    fitted: bool = False
    """True when fitted on public measurements of this family (not measured by trainfit)."""


_HOPPER = RuntimeProfile(
    name="hopper-h100-torch2.11-cu130",
    # NB: fitted on the accuracy suite's FIT cases only: emotion-mlp-fp32 (750.8 MiB, fp32
    # cuBLAS) and gpt2-bf16 (766.8 MiB, bf16 cuBLAS); the cost of creating the cuBLAS handle
    # (68 MiB) comes from the context probe in the same file, not from a reported case.
    base_context_bytes=int(750.8 * MiB),
    reduced_precision_extra_bytes=16 * MiB,
    no_cublas_saving_bytes=68 * MiB,
    # NB: from the context probe in the same file: device memory in use outside the allocator
    # grew by 69,206,016 B when a matmul's backward created the autograd thread's handle.
    backward_cublas_bytes=69_206_016,
    measured=True,
    source="benchmarks/accuracy/results/measured_h100.json (H100 80GB HBM3, 2026-11-26)",
)

GEFORCE_CONTEXT_FIXED_GIB = 0.056
GEFORCE_CONTEXT_PER_SM_GIB = 0.003288
"""The CUDA context of a GeForce card, fitted (least squares) on the calibration rows of the
public out-of-memory messages that say what the process holds beside PyTorch's memory (RTX 4050
Laptop, RTX 4090, RTX 5090): benchmarks/external/results/usable_memory.md, which also checks it
on held-out rows (RTX 4060 Laptop, RTX 3070, RTX 5090: within +0.034 GiB)."""

_GEFORCE = RuntimeProfile(
    name="geforce-oom-fit",
    # NB: the messages come from workloads that had loaded cuBLAS (and mostly cuDNN), so the fit
    # is the base context "after cuBLAS"; the precision, no-cuBLAS and backward-handle parts are
    # the H100's, not measured on GeForce cards.
    base_context_bytes=round(GEFORCE_CONTEXT_FIXED_GIB * GIB),
    per_sm_bytes=round(GEFORCE_CONTEXT_PER_SM_GIB * GIB),
    reduced_precision_extra_bytes=_HOPPER.reduced_precision_extra_bytes,
    no_cublas_saving_bytes=_HOPPER.no_cublas_saving_bytes,
    backward_cublas_bytes=_HOPPER.backward_cublas_bytes,
    measured=False,
    fitted=True,
    source="fitted on public out-of-memory messages of GeForce cards "
    "(benchmarks/external/results/usable_memory.md)",
)

PROFILES: dict[str, RuntimeProfile] = {
    _HOPPER.name: _HOPPER,
    _GEFORCE.name: _GEFORCE,
    "modelled-from-hopper": RuntimeProfile(
        name="modelled-from-hopper",
        base_context_bytes=_HOPPER.base_context_bytes,
        reduced_precision_extra_bytes=_HOPPER.reduced_precision_extra_bytes,
        no_cublas_saving_bytes=_HOPPER.no_cublas_saving_bytes,
        backward_cublas_bytes=_HOPPER.backward_cublas_bytes,
        measured=False,
        source="not measured on this family: the H100's context sizes are used (modelled)",
    ),
}


METAL_OTHER_FLOOR_BYTES = round(0.002705 * GIB)
"""The least memory Metal held outside PyTorch's MPS heaps in the public MPS out-of-memory
messages of the calibration rows (2.77 MB, an M4 Mac mini: benchmarks/external/results/
mps_limits.md). Above it the figure is workload-dependent (MPSGraph's own buffers: from 0.1 GiB
to tens of GiB in the same messages) and not modelled: an Apple GPU's runtime context is this
floor, never zero."""


def profile_of(device: Device) -> RuntimeProfile:
    """The runtime profile of `device`, its per-SM part resolved with the device's SM count."""
    profile = PROFILES.get(device.runtime_profile)
    if profile is None:
        raise UnknownNameError(
            "runtime profile", device.runtime_profile, PROFILES, hint=f"device {device.name!r}"
        )
    if not profile.per_sm_bytes:
        return profile
    if not device.sm_count.known:
        raise TrainfitError(
            f"device {device.name!r}: runtime profile {profile.name!r} needs the device's "
            "sm_count; add it to the device's row"
        )
    extra = profile.per_sm_bytes * int(device.sm_count.value)
    return replace(profile, base_context_bytes=profile.base_context_bytes + extra, per_sm_bytes=0)


NCCL_INIT_BYTES = {1: 683_671_552, 2: 979_435_520}
"""Device memory NCCL holds per rank, outside PyTorch's allocator, once a process group of that
many ranks is initialised eagerly (`init_process_group("nccl", device_id=...)`): measured as
total - free after the init minus before it on 2 x NVIDIA H200 (driver 580.159.04), torch
2.11.0+cu130, NCCL 2.28.9, 2026-11-26 (benchmarks/sharded/results/measured_h200.json)."""


def nccl_bytes(ranks: int) -> int:
    """NCCL's own device memory per rank in a group of `ranks`.

    NB: groups of more than two ranks take the two-rank figure. NCCL's buffers grow with its
    channels and connections, not with the ranks: a ring has two connections per channel (the
    previous and the next rank) at any scale, and FSDP2's and DDP's collectives run on one
    communicator (NVIDIA's NCCL maintainers, github.com/NVIDIA/nccl issues 864 and 986); what
    can change with the ranks is how many channels NCCL opens on the topology, and all-to-all
    or send/recv patterns (not used here). At four ranks (4 x H100 over NVLink, NCCL 2.28.9,
    NVLS off, 2026-11-26) it was 985,661,440 B after the first collective, within 0.7% of the
    two-rank figure, and no more after the training steps
    (benchmarks/sharded/results/scale_h100.md); eight ranks were not measured."""
    return NCCL_INIT_BYTES[1] if ranks <= 1 else NCCL_INIT_BYTES[2]


def cublas_workspace_bytes(compute_capability: tuple[int, int]) -> int:
    """The cuBLAS workspace PyTorch allocates per handle (CublasHandlePool.cpp defaults)."""
    if compute_capability >= (9, 0):
        return 32 * MiB
    return 4096 * 1024 * 2 + 16 * 1024 * 8


def context_bytes(
    profile: RuntimeProfile,
    uses_cublas: bool,
    reduced_precision: bool,
    backward_cublas: bool = True,
) -> int:
    """Device memory outside the allocator for a step with these library uses (`profile` as
    `profile_of` resolves it)."""
    if profile.per_sm_bytes:
        raise ValueError(f"runtime profile {profile.name!r}: resolve it with profile_of(device)")
    total = profile.base_context_bytes
    if not uses_cublas:
        return total - profile.no_cublas_saving_bytes
    if reduced_precision:
        total += profile.reduced_precision_extra_bytes
    if not backward_cublas:
        total -= profile.backward_cublas_bytes
    return total
