"""How one device of a plan trains, in the terms every trainer export shares: the
`TrainerLayout` of the plan's setting (or, for a GPU that needs several, its `Sharded`
verdict), with the GPU count, the optimizer and the dataloader settings decided once, so that
the hf, lightning, accelerate and seed-style YAML files agree.

What the plan computed: the micro-batch, accumulation, precision, gradient checkpointing,
optimizer kind, GPU count and sharding. What is decided here or in each format's module where
the plan is silent (each a conventional choice, written down):

- **optimizer**: AdamW and Adam as `adamw_torch_fused` on CUDA GPUs, `adamw_torch` on a CPU or
  an Apple GPU (Adam is AdamW with HF's default weight decay 0); the 8-bit optimizer as
  `adamw_bnb_8bit` (bitsandbytes must be installed where the job trains); `adafactor`; `sgd`,
  with `momentum=0.9` for sgd-momentum (the plan models the momentum buffer, not its value).
- **tf32**: on only for CUDA GPUs of compute capability 8.0 or more, when the plan's precision
  is tf32 or mixed (fp16/bf16 autocast leaves some matmuls in fp32); left unset otherwise (a
  plain fp32 plan keeps fp32 arithmetic; TrainingArguments refuses tf32 before Ampere).
- **dataloader**: 4 workers kept alive between epochs, pinned memory on CUDA only (as the
  seed-style YAML's conventional defaults).
- **gradient checkpointing** with `use_reentrant=False` (the non-reentrant variant PyTorch
  recommends); under FSDP as the engine's activation checkpointing instead (HF warns that
  `gradient_checkpointing` there adds an all-gather).
- **gradient clipping** from the spec's `grad_clip`; when the spec has none it is not set, so
  HF's default `max_grad_norm=1.0` applies and Lightning does not clip.
- **GPUs**: one device runs alone (Lightning strategy "auto", accelerate "NO"); `gpus` above 1
  (default: the plan's run, `--gpus`) runs data parallel ("ddp", "MULTI_GPU") with the
  effective batch split as the plan times it; a GPU that needs several is exported as FSDP2
  full sharding over the plan's GPU count (machines of the cheapest catalog instance).
- **pure-bf16** has no trainer flag: no autocast, and a note to load the model in bf16.

A device without a setting and without a sharded verdict (does not fit, not estimated, an
offloaded-only verdict), or one the GPU count does not suit, has no layout (TrainfitError).

Known limitations: the trainer files do not carry CPU offload; data parallel and sharded runs
are modelled with one GPU's figures (DDP's gradient buckets and the engines' gathered layers
are not counted, see `trainfit.plan.options.Sharded`); multi-machine files leave the main process
address and each machine's rank to the user.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from trainfit.errors import SpecError, TrainfitError
from trainfit.hardware.catalog import AMPERE, DeviceKind, get_device
from trainfit.plan.options import DevicePlan, Plan, Setting, Sharded
from trainfit.plan.tiers import split
from trainfit.spec import OptimizerKind, Precision

DATALOADER_WORKERS = 4
"""Worker processes per DataLoader (a conventional default, as the seed-style YAML's)."""


class Beside(StrEnum):
    """What a user must do beside the trainer file, the same for every device."""

    PURE_BF16 = "pure-bf16"
    """Pure bf16 has no trainer flag: load the model in bf16, no autocast."""
    BITSANDBYTES = "bitsandbytes"
    """The 8-bit optimizer needs bitsandbytes where the job trains."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RoundedBatch:
    """The batch split over the GPUs rounds the effective batch."""

    asked: int
    """The plan's effective batch."""
    micro_batch: int
    grad_accum: int
    gpus: int


@dataclass(frozen=True, kw_only=True, slots=True)
class DataParallel:
    """Data parallel over `gpus` GPUs: the plan's memory is one GPU's; DDP adds its gradient
    buckets (about one more copy of the gradients) per GPU."""

    gpus: int


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedGpus:
    """A sharded verdict is exported over the GPUs it was planned on, not the count asked."""

    planned: int
    asked: int


@dataclass(frozen=True, kw_only=True, slots=True)
class FullSharding:
    """FSDP full sharding over `gpus` GPUs at `per_gpu_bytes` each (modelled, not checked)."""

    gpus: int
    per_gpu_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Machines:
    """A run over several machines: each needs its rank and the main process's address."""

    machines: int
    instance: str
    """The catalog instance the machines are."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoTf32:
    """A tf32 plan on a device without TF32 (before compute capability 8.0): runs as fp32."""

    device: str


LayoutNote = Beside | RoundedBatch | DataParallel | PlannedGpus | FullSharding | Machines | NoTf32
"""A note of a trainer layout, a typed fact (words: `trainfit.export.layout_words`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LightningWrap:
    """Lightning's "fsdp" strategy wraps the root module only, where the plan's memory assumes
    each layer wrapped (words: `trainfit.export.lightning.lightning_fsdp_note`)."""

    checkpointing: bool
    """The layout checkpoints activations."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceNote:
    """A note of what `write_exports` wrote for one device."""

    device: str
    note: LayoutNote | LightningWrap


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainerLayout:
    """How one device of a plan trains, in terms every trainer export shares."""

    device: str
    """The catalog name of the device."""
    kind: DeviceKind
    """CUDA, MPS or CPU."""
    gpus: int
    """Processes in all (one per GPU); 1 on one device."""
    machines: int
    """Machines the processes span (sharded plans over more GPUs than one machine has)."""
    sharded: bool
    """FSDP full sharding of the model states over `gpus` GPUs."""
    precision: Precision
    checkpointing: bool
    optimizer: OptimizerKind
    micro_batch: int
    """Samples per GPU per forward/backward."""
    grad_accum: int
    """Micro-batches per optimizer step on each GPU."""
    tf32: bool
    """TF32 matmuls on (see the module docstring)."""
    grad_clip: float | None
    notes: tuple[LayoutNote, ...] = ()
    """What a user must do beside the file, or what differs from the plan."""

    @property
    def effective_batch(self) -> int:
        """Samples per optimizer step over all GPUs."""
        return self.micro_batch * self.grad_accum * self.gpus


@dataclass(frozen=True, kw_only=True, slots=True)
class _BatchSplit:
    """What the setting or the sharded verdict decides: the batch split over the GPUs."""

    precision: Precision
    checkpointing: bool
    optimizer: OptimizerKind
    gpus: int
    machines: int
    sharded: bool
    micro_batch: int
    grad_accum: int


def trainer_layout(plan: Plan, device: DevicePlan, gpus: int | None = None) -> TrainerLayout:
    """The layout of `device`'s setting on `gpus` GPUs (None: the plan's run's GPU count, 1
    without a run), or of its sharded verdict; TrainfitError when it has neither, or the
    effective batch does not split over the GPUs."""
    requested = gpus if gpus is not None else (plan.run.gpus if plan.run is not None else 1)
    if requested < 1:
        raise SpecError([f"gpus must be a positive integer, got {requested}"])
    kind, capability = _kind(device.device)
    notes: list[LayoutNote] = []
    effective = plan.effective_batch
    if device.setting is not None:
        split = _data_parallel(device.device, device.setting, kind, requested, effective, notes)
    elif device.sharded is not None:
        split = _fully_sharded(device.sharded, requested, effective, notes)
    else:
        raise TrainfitError(f"{device.device}: {device.verdict.value}; nothing to export")
    micro, accum, requested = split.micro_batch, split.grad_accum, split.gpus
    if micro * accum * requested != effective:
        notes.append(
            RoundedBatch(asked=effective, micro_batch=micro, grad_accum=accum, gpus=requested)
        )
    tf32 = (
        kind is DeviceKind.CUDA
        and split.precision in (Precision.TF32, Precision.FP16, Precision.BF16)
        and capability >= AMPERE
    )
    notes += _trainer_notes(device.device, split, tf32)
    return TrainerLayout(
        device=device.device,
        kind=kind,
        gpus=requested,
        machines=split.machines,
        sharded=split.sharded,
        precision=split.precision,
        checkpointing=split.checkpointing,
        optimizer=split.optimizer,
        micro_batch=micro,
        grad_accum=accum,
        tf32=tf32,
        grad_clip=plan.spec.grad_clip,
        notes=tuple(notes),
    )


def _data_parallel(
    name: str,
    s: Setting,
    kind: DeviceKind,
    requested: int,
    effective: int,
    notes: list[LayoutNote],
) -> _BatchSplit:
    """The setting on `requested` GPUs: data parallel above one, each GPU's share split as the
    plan times it; SpecError when not a CUDA GPU or the batch does not split."""
    micro, accum = s.micro_batch, s.grad_accum
    if requested > 1:
        if kind is not DeviceKind.CUDA:
            raise SpecError(
                [
                    f"{name}: runs over several GPUs are exported for CUDA GPUs "
                    f"only, got gpus={requested}"
                ]
            )
        if effective % requested:
            raise SpecError(
                [
                    f"an effective batch of {effective} does not split over {requested} "
                    f"GPUs: use a multiple of {requested}"
                ]
            )
        # NB: each GPU's share split as the plan times it (the chosen micro-batch or less)
        micro, accum = split(effective // requested, s.micro_batch)
        notes.append(DataParallel(gpus=requested))
    return _BatchSplit(
        precision=s.precision,
        checkpointing=s.checkpointing,
        optimizer=s.optimizer,
        gpus=requested,
        machines=1,
        sharded=False,
        micro_batch=micro,
        grad_accum=accum,
    )


def _fully_sharded(
    sh: Sharded, requested: int, effective: int, notes: list[LayoutNote]
) -> _BatchSplit:
    """The sharded verdict: FSDP full sharding over the verdict's GPUs and machines."""
    if requested not in (1, sh.gpus):
        notes.append(PlannedGpus(planned=sh.gpus, asked=requested))
    # NB: the verdict's GPU count is the one whose memory was modelled
    machines = max(sh.instances, 1)
    notes.append(FullSharding(gpus=sh.gpus, per_gpu_bytes=sh.per_gpu_bytes))
    if machines > 1:
        notes.append(Machines(machines=machines, instance=sh.instance))
    return _BatchSplit(
        precision=sh.precision,
        checkpointing=sh.checkpointing,
        optimizer=sh.optimizer,
        gpus=sh.gpus,
        machines=machines,
        sharded=True,
        micro_batch=sh.micro_batch,
        grad_accum=max(1, math.ceil(effective / (sh.gpus * sh.micro_batch))),
    )


def _trainer_notes(name: str, split: _BatchSplit, tf32: bool) -> list[LayoutNote]:
    """What the trainer files cannot say: TF32 missing, pure bf16, the 8-bit optimizer."""
    notes: list[LayoutNote] = []
    if split.precision is Precision.TF32 and not tf32:
        notes.append(NoTf32(device=name))
    if split.precision is Precision.PURE_BF16:
        notes.append(Beside.PURE_BF16)
    if split.optimizer is OptimizerKind.ADAMW_8BIT:
        notes.append(Beside.BITSANDBYTES)
    return notes


def _kind(name: str) -> tuple[DeviceKind, tuple[int, int]]:
    """The device's kind and compute capability."""
    try:
        found = get_device(name)
    except TrainfitError:
        # NB: a plan's devices were resolved when planned (a user catalog no longer active):
        # a GPU, as configs._kind takes it, without the capability tf32 needs
        return DeviceKind.CUDA, (0, 0)
    return found.kind, found.compute_capability


__all__ = [
    "DATALOADER_WORKERS",
    "Beside",
    "DataParallel",
    "DeviceNote",
    "FullSharding",
    "LayoutNote",
    "LightningWrap",
    "Machines",
    "NoTf32",
    "PlannedGpus",
    "RoundedBatch",
    "TrainerLayout",
    "trainer_layout",
]
