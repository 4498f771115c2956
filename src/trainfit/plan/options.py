"""What a plan gives: the verdicts, settings, tiers, the low-memory ladder's changes and the
facts of each device's note, as typed values (their words are made by `trainfit.plan.words`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from trainfit.distributed.search import DistributedPlan
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.estimator.scaling import BatchScaling
from trainfit.hardware.catalog import Device
from trainfit.spec import OptimizerKind, Precision, TrainSpec
from trainfit.timing.missing import NoStepTime
from trainfit.timing.run import CostLine, Recommendation, RunSpec, RunTime
from trainfit.timing.step import StepTime

DEFAULT_MARGIN = 0.10
"""Fraction of device memory a plan keeps free (allocator and driver variation, other users)."""

TIERS: tuple[tuple[str, float], ...] = (
    ("conservative", 0.50),
    ("balanced", 0.70),
    ("aggressive", 0.85),
)
"""The tiers as the share of device memory a step may use (a speaker-embedding CNN's plan
named them); "maximum" is the largest micro-batch inside the safety margin."""


class Verdict(str, Enum):
    """Whether a device can train the job."""

    COMFORTABLE = "fits comfortably"
    WITH_CHANGES = "fits with the listed changes"
    NO = "does not fit"
    NOT_ESTIMATED = "not estimated"


class Change(str, Enum):
    """One change of the low-memory ladder, in the ladder's order (`trainfit.plan.ladder`)."""

    MIXED_PRECISION = "mixed precision"
    QUARTER_MICRO_BATCH = "quarter micro-batch"
    CHECKPOINTING = "gradient checkpointing"
    EIGHT_BIT_ADAMW = "8-bit AdamW"
    MICRO_BATCH_ONE = "micro-batch 1"


@dataclass(frozen=True, kw_only=True, slots=True)
class Setting:
    """One way to run the step: precision, checkpointing, optimizer, batch split."""

    precision: Precision
    checkpointing: bool
    optimizer: OptimizerKind
    micro_batch: int
    grad_accum: int
    needed_bytes: int
    """Device memory needed at this micro-batch."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Tier:
    """A micro-batch chosen to use at most `share` of the device's memory."""

    name: str
    share: float
    micro_batch: int
    """0 when not even one sample fits inside the share."""
    grad_accum: int
    needed_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Sharded:
    """How many of a GPU hold a step that one cannot with the model states sharded across
    them, from the multi-GPU plan (`DevicePlan.distributed`, FSDP2 or ZeRO-3 without
    offload), and the cheapest catalog instance that has that many."""

    gpus: int
    per_gpu_bytes: int
    precision: Precision
    checkpointing: bool
    optimizer: OptimizerKind
    micro_batch: int
    instance: str
    """The cheapest catalog instance with this GPU ("" when none has it)."""
    instances: int
    """How many of that instance hold `gpus` GPUs."""
    usd_per_hour: float | None
    """On-demand price of those instances (None when the catalog has no price)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Offloaded:
    """One GPU with the model states kept in CPU memory (FSDP2's CPUOffloadPolicy), from the
    multi-GPU plan: what the GPU and the host would hold."""

    gpu_bytes: int
    host_bytes: int
    """The model states the host's RAM holds."""
    micro_batch: int


# -- what differs from the requested settings --------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class MpsAutocast:
    """Mixed precision on an Apple GPU (planned after fp32 there)."""

    precision: Precision


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuFp32:
    """fp32 on the CPU for a job asked in mixed precision (none is planned there)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Accumulation:
    """The effective batch in several micro-batches, with gradient accumulation."""

    micro_batch: int
    grad_accum: int


@dataclass(frozen=True, kw_only=True, slots=True)
class RoundedBatch:
    """Micro-batch x accumulation is not the effective batch asked for (a prime one)."""

    effective: int
    asked: int


SettingChange = Change | MpsAutocast | CpuFp32 | Accumulation | RoundedBatch


# -- the facts of a device's note ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryUnknown:
    """The catalog has no memory size for the device."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RamUnknown:
    """This host's RAM could not be detected (the CPU as a device)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuSized:
    """The CPU planned against its RAM."""

    ram_bytes: int
    from_catalog: bool
    """The RAM is a user catalog's cpu row's (else this host's)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuShort:
    """Not one sample fits the CPU's RAM, checkpointing included."""

    one_sample_bytes: int
    usable_bytes: int
    ram_bytes: int
    from_catalog: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuShort:
    """Why one GPU cannot hold the job with every change on its ladder; what several would
    hold is the device plan's `distributed`, `sharded` and `offloaded`."""

    one_sample_bytes: int | None
    """Device memory one sample needs (None: the model states alone exceed the budget)."""
    states_bytes: int
    """The least the model states and runtime need (weights, gradients, optimizer state)."""
    usable_bytes: float
    """The device's memory inside the margin."""
    optimizer: OptimizerKind
    """The requested optimizer (the multi-GPU plan's)."""
    cuda: bool
    """A CUDA GPU, planned over several of it; else one with more memory is needed."""
    no_checkpointing: tuple[str, ...] = ()
    """Why a checkpointing rung could not be taken, once per rung that tried."""


Note = MemoryUnknown | RamUnknown | CpuSized | CpuShort | GpuShort


@dataclass(frozen=True, kw_only=True, slots=True)
class NoMultiGpu:
    """No multi-GPU plan holds one sample per GPU, with what was fixed for the search."""

    strategy: Strategy | None
    offload: Offload | None
    gpus: int | None
    nodes: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class DevicePlan:
    """What one device can do with the job."""

    device: str
    display: str
    verdict: Verdict
    setting: Setting | None
    changes: tuple[SettingChange, ...]
    """What differs from the requested settings (`trainfit.plan.words.change_text`)."""
    max_micro_batch: int
    """Largest micro-batch of the chosen setting inside the margin (0: none)."""
    tiers: tuple[Tier, ...]
    note: Note | None = None
    """Why there is no setting, or how the CPU was sized (`trainfit.plan.words.note_text`)."""
    sharded: Sharded | None = None
    """For a GPU that does not fit the job: how many of it would, sharded (modelled)."""
    offloaded: Offloaded | None = None
    """For a GPU that does not fit the job: one of it with CPU offload, when that fits
    (modelled)."""
    step_time: StepTime | None = None
    """One optimizer step of the chosen setting on one GPU (modelled)."""
    step_times: tuple[tuple[int, StepTime], ...] = ()
    """For 2, 4, 8 and 16 GPUs (those the effective batch splits over): one GPU's step over
    its share, the chosen micro-batch or less (data parallel); its samples and tokens per
    second are those of all the GPUs together (`trainfit.plan.times.over_gpus`)."""
    no_time: NoStepTime | None = None
    """Why there is no step time, when there is none (`trainfit.plan.words.time_text`)."""
    run: RunTime | None = None
    """The whole run's hours, when the plan was given its data size."""
    costs: tuple[CostLine, ...] = ()
    """What the run costs: on one's own device, and on each catalog instance of this GPU."""
    distributed: DistributedPlan | None = None
    """The fewest GPUs of this kind that hold the job, the engine and per-rank memory
    (`trainfit.distributed`, modelled); for a GPU that does not fit, or when asked for."""
    no_multi_gpu: NoMultiGpu | None = None
    """Why there is no multi-GPU plan, when one was looked for and none holds the job."""


def no_setting(device: Device, verdict: Verdict, note: Note) -> DevicePlan:
    """The plan of a device with no setting to give (not estimated, or does not fit)."""
    return DevicePlan(
        device=device.name,
        display=device.display,
        verdict=verdict,
        setting=None,
        changes=(),
        max_micro_batch=0,
        tiers=(),
        note=note,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Rung:
    """One step down the low-memory ladder, with what it needs and saves."""

    change: Change | None
    """None for the ladder's start (fp32 at the whole effective batch)."""
    precision: Precision
    micro_batch: int
    grad_accum: int
    needed_bytes: int
    saved_bytes: int
    """Against the rung before (0 for the first)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """The plan of one job over several devices (as JSON: `trainfit.plan.words.plan_dict`)."""

    spec: TrainSpec
    effective_batch: int
    margin: float
    devices: tuple[DevicePlan, ...]
    ladder: tuple[Rung, ...]
    ladder_device: str
    trainable_parameters: int = 0
    tokens_per_sample: int | None = None
    run: RunSpec | None = None
    """The run's data and prices, when given (`with_run`)."""
    recommendation: Recommendation | None = None
    parameters: int = 0
    """All parameters of the model, trainable or not."""
    scalings: dict[str, BatchScaling] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )
    """Each GPU's memory-against-micro-batch scaling of its chosen setting, by device name
    (kept for the report's curves and breakdowns; not in the JSON)."""
