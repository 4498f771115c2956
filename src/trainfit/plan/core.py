"""`plan()`: for each device, the settings that fit, a verdict, tiers and the low-memory ladder.

For each device the step is tried on a ladder of settings, cheapest first (seed 004's order):
the precision the device supports (bf16 from Ampere on, else fp16 with loss scaling), then
gradient checkpointing, then 8-bit AdamW state. On the first rung where at least one sample fits
inside the safety margin, the micro-batch is the largest that fits up to the effective batch,
and gradient accumulation makes up the rest. Every figure is a full estimate (trace, allocator
replay, runtime context), replayed per micro-batch from `trainfit.estimator.scaling`.

The CPU as a device is planned in fp32 (then with checkpointing) against the host's RAM (or a
user catalog's cpu row), each micro-batch tried a full CPU estimate.

A CUDA GPU that cannot hold the job alone (every CUDA GPU, with --strategy/--gpus/--nodes) is
also planned over several of it by `trainfit.distributed` (`DevicePlan.distributed`).

Known limitations: Apple GPUs get a "not estimated" verdict; LoRA/QLoRA are not planned yet;
the does-not-fit verdict's `sharded` figure is the older model without FSDP2's gathered units
(`distributed` has them); devices of one compute-capability family share traces.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import Enum

from trainfit.distributed.search import DistributedPlan, plan_distributed
from trainfit.distributed.strategy import Layout, Offload, Strategy, check_batch
from trainfit.errors import SpecError, TraceError
from trainfit.estimator.scaling import PROBES, BatchScaling, max_micro_batch, scale_batch
from trainfit.estimator.step import gpu_fits, gpu_memory
from trainfit.hardware.catalog import Device, cheapest_instance, get_device
from trainfit.memory.runtime import PROFILES, context_bytes, cublas_workspace_bytes, nccl_bytes
from trainfit.memory.states import model_states, parameter_counts
from trainfit.spec import OptimizerKind, Precision, ReferenceKind, TrainSpec
from trainfit.timing.run import (
    CostLine,
    Recommendation,
    RunSpec,
    RunTime,
    Stage,
    recommend,
    run_estimate,
    run_time,
)
from trainfit.timing.step import CALIBRATED, RateMissing, StepTime, scaled, step_time
from trainfit.trace.autocast import WEIGHT_CAST
from trainfit.trace.kernels.attention import kernel_family, traced_kernel
from trainfit.trace.step import Category, StepTrace, trace_step
from trainfit.trace.target import Target
from trainfit.training import Phase

GIB = 2**30

DEFAULT_MARGIN = 0.10
"""Fraction of device memory a plan keeps free (allocator and driver variation, other users)."""

TIERS: tuple[tuple[str, float], ...] = (
    ("conservative", 0.50),
    ("balanced", 0.70),
    ("aggressive", 0.85),
)
"""Seed 002's tiers as the share of device memory a step may use; "maximum" is the largest
micro-batch inside the safety margin."""


class Verdict(str, Enum):
    """Whether a device can train the job."""

    COMFORTABLE = "fits comfortably"
    WITH_CHANGES = "fits with the listed changes"
    NO = "does not fit"
    NOT_ESTIMATED = "not estimated"


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
    """How many of a GPU would hold a step that one cannot, with the model states sharded
    across them (FSDP full sharding or DeepSpeed ZeRO-3), and the cheapest catalog instance
    that has that many.

    Modelled, not checked on GPUs: per GPU, the model states divided by the GPU count plus what
    one sample needs beside them on one GPU (activations, temporaries, workspaces, context), as
    traced for the setting. The unsharded parameters of the layer being computed and the
    collectives' buffers are not counted. Multi-GPU engines are planned and checked with
    torchrun under issue #7.
    """

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
    """One GPU with the model states kept in CPU memory (FSDP2's CPUOffloadPolicy, DeepSpeed
    ZeRO-Offload): what the GPU and the host would hold. Modelled as `Sharded` is, with the
    states and the optimizer step moved off the GPU; not checked on a GPU."""

    gpu_bytes: int
    host_bytes: int
    """The model states the host's RAM holds."""
    micro_batch: int


@dataclass(frozen=True, kw_only=True, slots=True)
class DevicePlan:
    """What one device can do with the job."""

    device: str
    display: str
    verdict: Verdict
    setting: Setting | None
    changes: tuple[str, ...]
    """What differs from the requested settings, in words."""
    max_micro_batch: int
    """Largest micro-batch of the chosen setting inside the margin (0: none)."""
    tiers: tuple[Tier, ...]
    note: str = ""
    sharded: Sharded | None = None
    """For a GPU that does not fit the job: how many of it would, sharded (modelled)."""
    offloaded: Offloaded | None = None
    """For a GPU that does not fit the job: one of it with CPU offload, when that fits
    (modelled)."""
    step_time: StepTime | None = None
    """One optimizer step of the chosen setting on one GPU (modelled)."""
    step_times: tuple[tuple[int, StepTime], ...] = ()
    """For 2, 4, 8 and 16 GPUs (those the effective batch splits over): one GPU's step over
    its share, the chosen micro-batch or less (data parallel)."""
    time_note: str = ""
    """Why there is no step time, when there is none."""
    run: RunTime | None = None
    """The whole run's hours, when the plan was given its data size."""
    costs: tuple[CostLine, ...] = ()
    """What the run costs: on one's own device, and on each catalog instance of this GPU."""
    distributed: DistributedPlan | None = None
    """The fewest GPUs of this kind that hold the job, the engine and per-rank memory
    (`trainfit.distributed`, modelled); for a GPU that does not fit, or when asked for."""
    distributed_note: str = ""
    """Why there is no multi-GPU plan, when one was looked for and none holds the job."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Rung:
    """One step down the low-memory ladder, with what it needs and saves."""

    change: str
    micro_batch: int
    grad_accum: int
    needed_bytes: int
    saved_bytes: int
    """Against the rung before (0 for the first)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """The plan of one job over several devices."""

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
    (kept for the report's curves and breakdowns; not in `to_dict`)."""

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (bytes as integers, enums as their values)."""

        def plain(value: object) -> object:
            if isinstance(value, Enum):
                return value.value
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            return value

        return {
            "model": self.spec.model,
            "lora": None if self.spec.lora is None else self.spec.lora.to_dict(),
            "effective_batch": self.effective_batch,
            "margin": self.margin,
            "devices": [_device_dict(d, plain) for d in self.devices],
            "ladder_device": self.ladder_device,
            "ladder": [plain(dataclasses.asdict(r)) for r in self.ladder],
            "run": None if self.run is None else plain(dataclasses.asdict(self.run)),
            "recommendation": (
                None if self.recommendation is None else self.recommendation.to_dict()
            ),
        }


def _device_dict(d: DevicePlan, plain: Callable[[object], object]) -> dict[str, object]:
    """A DevicePlan as JSON: times and costs as the estimate's JSON gives them."""
    out = plain(dataclasses.asdict(d))
    assert isinstance(out, dict)
    for name in ("step_time", "step_times", "costs", "run", "distributed"):
        out.pop(name)
    out["distributed"] = None if d.distributed is None else d.distributed.to_dict()
    out["time"] = None if d.step_time is None else d.step_time.to_dict()
    out["time_by_gpus"] = {str(n): t.to_dict() for n, t in d.step_times}
    out["run"] = None if d.run is None else plain(dataclasses.asdict(d.run))
    out["costs"] = [c.to_dict() for c in d.costs]
    return out


@dataclass(kw_only=True, slots=True)
class _Cache:
    """What one plan computes once: traces per setting and kernel family, parameter counts."""

    scalings: dict[tuple[object, ...], BatchScaling] = dataclasses.field(default_factory=dict)
    ones: dict[tuple[object, ...], StepTrace] = dataclasses.field(default_factory=dict)
    """Traces at one sample made by the one-sample check (kept by the scaling for batch 1,
    and copied from by the same setting with another optimizer)."""
    counts: tuple[int, int] | None = None
    replays: dict[tuple[object, ...], int] = dataclasses.field(default_factory=dict)
    """Device memory of replays with changed sizes, by what they depend on."""


def plan(
    spec: TrainSpec,
    effective_batch: int,
    devices: tuple[str, ...],
    margin: float = DEFAULT_MARGIN,
    precision: Precision | None = None,
    ladder: bool = True,
    jobs: int = 1,
    run: RunSpec | None = None,
    measured_step: tuple[float, str] | None = None,
    progress: Callable[[str], None] | None = None,
    strategy: Strategy | None = None,
    offload: Offload | None = None,
    gpus: int | None = None,
    nodes: int | None = None,
    multi_gpu: bool = False,
) -> Plan:
    """Plan `spec` (its batch and precision are ignored) for an effective batch on `devices`.

    `precision` None picks per device (bf16 autocast where supported, else fp16); a precision
    given is used everywhere, and is an error on a device that lacks it. With `jobs` above 1
    the ladder of a model of a billion parameters or more is traced in a worker process while
    the devices are planned (same figures; a worker's start-up costs a few seconds of a core).
    `run` (data size, epochs, prices) adds each device's run hours and costs and the
    recommendations (`with_run`); `measured_step` (seconds, device) scales every step time by
    a step measured with the plan's setting on that device (`with_measured_step`).
    `progress` is told each device as its planning starts ("planning h100").

    `strategy`, `offload`, `gpus` and `nodes` (or `multi_gpu`) plan every CUDA GPU over
    several of it (`with_distributed`); without them only the GPUs that cannot hold the job
    alone are.
    """
    if gpus is not None or nodes is not None:
        check_batch(
            effective_batch,
            Layout(gpus=gpus if gpus is not None else (nodes or 1) * 8, nodes=nodes or 1),
        )
    problems = []
    if effective_batch < 1:
        problems.append(f"effective batch must be a positive integer, got {effective_batch}")
    if jobs < 1:
        problems.append(f"jobs must be a positive integer, got {jobs}")
    if run is not None and run.gpus > 1 and effective_batch % run.gpus:
        problems.append(
            f"an effective batch of {effective_batch} does not split over {run.gpus} GPUs: "
            f"use a multiple of {run.gpus}"
        )
    if not 0.0 <= margin < 1.0:
        problems.append(f"margin must be a fraction in [0, 1), got {margin}")
    if not devices:
        problems.append("no devices to plan for: name at least one with --device")
    if problems:
        raise SpecError(problems)
    resolved = [get_device(name) for name in devices]
    if precision in (Precision.BF16, Precision.PURE_BF16):
        lacking = [d.name for d in resolved if d.kind == "cuda" and d.compute_capability < (8, 0)]
        if lacking:
            raise SpecError(
                [
                    f"{precision.value} is not supported on {', '.join(lacking)} (no bf16 before "
                    "compute capability 8.0): use fp16, or leave the precision to the plan"
                ]
            )
    if precision is Precision.TF32:
        macs = [d.name for d in resolved if d.kind == "mps"]
        if macs:
            raise SpecError(
                [
                    f"tf32 is a CUDA setting, not available on {', '.join(macs)}: use fp32, "
                    "fp16 or bf16 there, or leave the precision to the plan"
                ]
            )
    if precision is not None:
        spec = dataclasses.replace(spec, precision=precision)
    cache = _Cache()
    cuda = [d for d in resolved if d.kind == "cuda" and d.memory_bytes]
    worker = None
    if ladder and cuda and jobs > 1 and sum(_counts(spec, cache)) >= WORKER_PARAMETERS:
        # NB: the worker also takes the doomed GPUs whose precision differs from the first
        # GPU's: their traces share no passes with the ones this process makes, while the
        # others copy the passes of a setting traced here and cost less here than there
        first = _rungs(spec, cuda[0], precision is None)[0][0].precision
        doomed = [
            job
            for job in _doomed(spec, cuda, margin, precision is None, cache)
            if job[0].precision is not first
        ]
        worker = _LadderWorker(_ladder_steps(spec, effective_batch, cuda[0]), cuda[0], doomed)
    try:
        plans = tuple(
            _plan_device(
                spec,
                effective_batch,
                d,
                margin,
                precision is None,
                cache,
                worker,
                gpu_counts=tuple(sorted({*GPU_COUNTS, run.gpus} - {1}))
                if run is not None
                else GPU_COUNTS,
            )
            for d in _announced(resolved, progress)
        )
        rungs = _ladder(spec, effective_batch, cuda[0], cache, worker) if ladder and cuda else ()
    finally:
        if worker is not None:
            worker.close()
    tokens = next((s.base.tokens_per_sample for s in cache.scalings.values()), None)
    result = Plan(
        spec=spec,
        effective_batch=effective_batch,
        margin=margin,
        devices=plans,
        ladder=rungs,
        ladder_device=cuda[0].name if ladder and cuda else "",
        trainable_parameters=_counts(spec, cache)[1],
        tokens_per_sample=tokens,
        parameters=_model_parameters(spec, cache),
        scalings=_chosen_scalings(spec, resolved, plans, cache),
    )
    if measured_step is not None:
        result = with_measured_step(result, *measured_step)
    asked = multi_gpu or any(x is not None for x in (strategy, offload, gpus, nodes))
    result = with_distributed(
        result, precision, margin, strategy, offload, gpus, nodes, every=asked
    )
    return with_run(result, run) if run is not None and run.sized else result


def _announced(devices: list[Device], progress: Callable[[str], None] | None) -> Iterator[Device]:
    """`devices`, telling `progress` of each as it is reached."""
    for d in devices:
        if progress is not None:
            progress(f"planning {d.name}")
        yield d


def _chosen_scalings(
    spec: TrainSpec, devices: list[Device], plans: tuple[DevicePlan, ...], cache: _Cache
) -> dict[str, BatchScaling]:
    """The cached scaling of each GPU's chosen setting (no new trace: the plan made them)."""
    found = {}
    for device, d in zip(devices, plans, strict=True):
        s = d.setting
        if s is None or device.kind not in ("cuda", "mps"):
            continue
        chosen = dataclasses.replace(
            spec, precision=s.precision, checkpointing=s.checkpointing, optimizer=s.optimizer
        )
        if _traced(chosen, device, cache):
            found[device.name] = _scaling(chosen, device, cache)
    return found


def with_distributed(
    result: Plan,
    precision: Precision | None,
    margin: float,
    strategy: Strategy | None,
    offload: Offload | None,
    gpus: int | None,
    nodes: int | None,
    every: bool,
) -> Plan:
    """`result` with each CUDA GPU's multi-GPU plan (`trainfit.distributed.plan_distributed`):
    every CUDA GPU when `every`, else those that do not fit alone."""
    devices = []
    for d in result.devices:
        device = get_device(d.device)
        if (
            device.kind != "cuda"
            or not device.memory_bytes
            or (not every and d.verdict is not Verdict.NO)
        ):
            devices.append(d)
            continue
        chosen = d.setting.precision if d.setting is not None else None
        spec = dataclasses.replace(
            result.spec,
            device=device.name,
            precision=precision or chosen or supported_precision(device),
        )
        found = plan_distributed(
            spec, result.effective_batch, device, margin, strategy, offload, gpus, nodes
        )
        note = "" if found is not None else _no_distributed(strategy, offload, gpus, nodes)
        d = dataclasses.replace(d, distributed=found, distributed_note=note)
        if d.verdict is Verdict.NO:
            d = _beyond_from(d, device, spec, found)
        devices.append(d)
    return dataclasses.replace(result, devices=tuple(devices))


def _beyond_from(
    d: DevicePlan, device: Device, spec: TrainSpec, found: DistributedPlan | None
) -> DevicePlan:
    """A does-not-fit GPU's verdict with what would hold the job taken from its multi-GPU plan
    (`trainfit.distributed`: per rank, with the engine's gathered units and buffers, checked
    on GPUs), in place of the single-GPU plan's own sharded/offloaded estimate, so that the
    plan gives one answer."""
    old = {_beyond_words(device, worked, d.sharded, d.offloaded) for worked in (True, False)}
    tail = next((w for w in old if w and w in d.note), None)
    if tail is None:
        return d
    sharded = offloaded = None
    if found is None:
        words = f"; {d.distributed_note}"
    else:
        m = found.memory
        how = found.strategy.value + (
            f" with {found.offload.value} offloaded to CPU memory"
            if found.offload is not Offload.NONE
            else ""
        )
        where = (
            f"; the cheapest catalog instance with them: {found.instances} x {found.instance}"
            + (f" (${found.usd_per_hour:.2f}/h on demand)" if found.usd_per_hour else "")
            if found.instance
            else f"; no catalog instance has {found.gpus} of this GPU"
        )
        words = (
            f"; it would fit {found.gpus} of these GPUs with {how} ({found.precision.value}"
            + (", gradient checkpointing" if found.checkpointing else "")
            + f", {spec.optimizer.value}), {m.total_bytes / GIB:.2f} GiB each at "
            f"{_samples(found.micro_batch)} per GPU ({m.label}; the multi-GPU plan){where}"
        )
        if found.strategy is not Strategy.DDP and found.offload is Offload.NONE:
            sharded = Sharded(
                gpus=found.gpus,
                per_gpu_bytes=m.total_bytes,
                precision=found.precision,
                checkpointing=found.checkpointing,
                optimizer=spec.optimizer,
                micro_batch=found.micro_batch,
                instance=found.instance,
                instances=found.instances,
                usd_per_hour=found.usd_per_hour,
            )
        one = found if found.gpus == 1 and found.offload is not Offload.NONE else None
        one = one or (
            found.fewer_with_offload
            if found.fewer_with_offload is not None and found.fewer_with_offload.gpus == 1
            else None
        )
        if one is not None:
            offloaded = Offloaded(
                gpu_bytes=one.memory.total_bytes,
                host_bytes=one.memory.host_bytes_per_node,
                micro_batch=one.micro_batch,
            )
    if offloaded is not None:
        words += (
            f"; with the model states in CPU memory (FSDP2 CPU offload) one of these GPUs would "
            f"need {offloaded.gpu_bytes / GIB:.2f} GiB at {_samples(offloaded.micro_batch)} and "
            f"the host {offloaded.host_bytes / GIB:.1f} GiB of RAM (modelled)"
        )
    return dataclasses.replace(
        d, note=d.note.replace(tail, words), sharded=sharded, offloaded=offloaded
    )


def _no_distributed(
    strategy: Strategy | None, offload: Offload | None, gpus: int | None, nodes: int | None
) -> str:
    what = []
    if strategy is not None:
        what.append(strategy.value)
    if offload is not None:
        what.append(f"offload {offload.value}")
    if gpus is not None or nodes is not None:
        what.append(f"{gpus or 'auto'} GPUs over {nodes or 'auto'} nodes")
    fixed = f" ({', '.join(what)})" if what else ""
    return (
        f"no multi-GPU plan{fixed} holds one sample per GPU up to the GPU counts tried "
        "(modelled): sequence or tensor parallelism, a larger GPU or LoRA would be needed"
    )


def supported_precision(device: Device) -> Precision:
    """The mixed precision of `device`: bf16 autocast where a CUDA GPU computes in bf16
    (compute capability 8.0 on), else fp16; fp16 on an Apple GPU.

    NB: from the compute capability (bf16 tensor cores arrived with Ampere, sm80); the catalog's
    list of supported precisions says the same for every CUDA row. MPS autocast takes fp16 from
    torch 2.5 and bf16 from torch 2.6 on macOS 14, but the M1 and M2 have no bf16 arithmetic
    (Metal emulates it in fp32), so fp16 is the Mac's mixed precision.
    """
    if device.kind == "mps":
        return Precision.FP16
    return Precision.BF16 if device.compute_capability >= (8, 0) else Precision.FP16


def _key(spec: TrainSpec, device: Device) -> tuple[object, ...]:
    """What a setting's traces depend on: the settings the plan varies, the kind of device and
    (CUDA) the kernel family."""
    return (
        spec.precision,
        spec.checkpointing,
        spec.optimizer,
        device.kind,
        kernel_family(device.compute_capability) if device.kind == "cuda" else (),
    )


def _scaling(spec: TrainSpec, device: Device, cache: _Cache) -> BatchScaling:
    # NB: devices of one kernel family (the compute-capability thresholds attention kernels
    # depend on) trace the same step, so they share traces; the allocator replay, cuBLAS
    # workspace and runtime context are per device.
    key = _key(spec, device)
    found = cache.scalings.get(key) or _same_trace(spec, device, cache)
    if found is None:
        # NB: not probed at batch 1: some models take other code paths there (the line
        # through batches 1, 2 and 4 failed its check for a 7B Llama step)
        found = scale_batch(
            dataclasses.replace(spec, device=device.name),
            passes_from=_other_optimizer(spec, device, cache),
        )
        if key in cache.ones:
            found.exact[1] = cache.ones[key]
    cache.scalings[key] = found
    if found.device.name != device.name:
        found = dataclasses.replace(
            found, device=device, spec=dataclasses.replace(found.spec, device=device.name)
        )
    return found


def _one_sample_over(spec: TrainSpec, device: Device, cache: _Cache, budget: int) -> int | None:
    """Device memory one sample needs when it does not fit `budget`; None when it fits or the
    setting is already traced.

    NB: a setting that cannot run one sample costs one trace; one that can keeps the trace
    for its scaling's batch 1 (which the line through larger batches need not match: some
    models take other code paths there). A model that cannot train on one sample (BatchNorm)
    is traced at the scaling's base batch instead, and counts as not fitting one sample when
    that does not fit.
    """
    if _key(spec, device) in cache.scalings or _same_trace(spec, device, cache) is not None:
        return None
    trace, at = _trace_at_one(spec, device, cache)
    if gpu_fits(trace, at, device, budget):
        return None
    result, context = gpu_memory(trace, at, device)
    return result.peak_reserved_bytes + context


def _passes_alike(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two trace keys (`_key`) differ at most in the optimizer, so that their forward
    and backward passes are the same."""
    return a[:2] == b[:2] and a[3:] == b[3:]


def _other_optimizer(spec: TrainSpec, device: Device, cache: _Cache) -> BatchScaling | None:
    """A scaling of the same setting with another optimizer, whose forward and backward
    passes a trace of `spec` can copy (only the optimizer steps are then traced)."""
    key = _key(spec, device)
    for other, scaling in cache.scalings.items():
        if _passes_alike(other, key) and scaling.affine:
            return scaling
    return None


def _same_trace(spec: TrainSpec, device: Device, cache: _Cache) -> BatchScaling | None:
    """A scaling of the same setting traced for another kernel family whose every attention
    call runs the same traced op on `device` (e.g. no dropout: Hopper's cuDNN attention and
    Ampere's flash attention trace alike)."""
    for key, scaling in cache.scalings.items():
        if key[:4] != _key(spec, device)[:4] or device.kind != "cuda":
            continue
        theirs = scaling.device.compute_capability
        calls = scaling.base.attention_calls
        if all(
            traced_kernel(c, theirs) == traced_kernel(c, device.compute_capability) for c in calls
        ):
            return scaling
    return None


def _rungs(
    spec: TrainSpec, device: Device, auto_precision: bool
) -> list[tuple[TrainSpec, tuple[str, ...]]]:
    """The settings to try on `device`, cheapest change first, with the changes in words."""
    base = spec
    changes: list[str] = []
    rungs = []
    if auto_precision and device.kind == "mps":
        # NB: fp32 first on a Mac (what the seeds' Mac configs run; MPS autocast is young),
        # then fp16 autocast as the first change
        base = dataclasses.replace(spec, precision=Precision.FP32)
        rungs.append((base, ()))
        base = dataclasses.replace(base, precision=Precision.FP16)
        changes.append("fp16 autocast (torch 2.5 or later; its GradScaler needs torch 2.8)")
    elif auto_precision:
        base = dataclasses.replace(spec, precision=supported_precision(device))
    rungs.append((base, tuple(changes)))
    if not base.checkpointing:
        base = dataclasses.replace(base, checkpointing=True)
        changes.append("gradient checkpointing")
        rungs.append((base, tuple(changes)))
    # NB: bitsandbytes' 8-bit optimizers are CUDA kernels; not offered on an Apple GPU
    if base.optimizer in (OptimizerKind.ADAMW, OptimizerKind.ADAM) and device.kind == "cuda":
        base = dataclasses.replace(base, optimizer=OptimizerKind.ADAMW_8BIT)
        changes.append("8-bit AdamW state")
        rungs.append((base, tuple(changes)))
    return rungs


def _split(effective: int, largest: int) -> tuple[int, int]:
    """Micro-batch and accumulation for an effective batch, micro-batch at most `largest`.

    The largest divisor of the effective batch that fits keeps it exact; when that divisor is
    under half of what fits (a prime effective batch), the micro-batch that fits is used and
    the effective batch rounds up (micro-batch x accumulation).
    """
    largest = min(largest, effective)
    divisor = max(d for d in range(1, largest + 1) if effective % d == 0)
    if 2 * divisor >= largest:
        return divisor, effective // divisor
    accum = math.ceil(effective / largest)
    return math.ceil(effective / accum), accum


def _plan_device(
    spec: TrainSpec,
    effective: int,
    device: Device,
    margin: float,
    auto_precision: bool,
    cache: _Cache,
    worker: _LadderWorker | None = None,
    gpu_counts: tuple[int, ...] = (),
) -> DevicePlan:
    why_not = ""
    if device.kind == "cpu":
        return dataclasses.replace(
            _plan_cpu(spec, effective, device, margin),
            time_note="step time not modelled on the CPU (GPUs and Apple GPUs only)",
        )
    if not device.memory_bytes:
        why_not = "its memory size is not in the catalog: give it in a user catalog file"
    if why_not:
        return _no_setting(device, Verdict.NOT_ESTIMATED, why_not)
    skipped: list[str] = []
    cannot_checkpoint = False
    budget = (1.0 - margin) * device.memory_bytes
    floor = 0
    latest_one: int | None = None
    for rung_spec, changes in _rungs(spec, device, auto_precision):
        floor = _floor(rung_spec, device, cache)
        if floor > budget:
            continue  # weights, gradients and optimizer state alone do not fit
        try:
            over = _one_sample_over(rung_spec, device, cache, int(budget))
            if over is not None:
                latest_one = over
                continue
            scaling = _scaling(rung_spec, device, cache)
        except SpecError as exc:
            if not rung_spec.checkpointing or spec.checkpointing:
                raise
            skipped.append(f"no gradient checkpointing ({exc})")
            cannot_checkpoint = True
            continue
        found = max_micro_batch(rung_spec, margin=margin, limit=effective, scaling=scaling)
        if found.batch < 1:
            latest_one = found.needed_bytes
            continue
        micro, accum = _split(effective, found.batch)
        needed = scaling.needed_bytes(micro)
        changes = _with_split(changes, micro, accum, effective)
        setting = Setting(
            precision=rung_spec.precision,
            checkpointing=rung_spec.checkpointing,
            optimizer=rung_spec.optimizer,
            micro_batch=micro,
            grad_accum=accum,
            needed_bytes=needed,
        )
        return DevicePlan(
            device=device.name,
            display=device.display,
            verdict=Verdict.COMFORTABLE if not changes else Verdict.WITH_CHANGES,
            setting=setting,
            changes=changes,
            max_micro_batch=_max(rung_spec, margin, scaling),
            tiers=_tiers(rung_spec, effective, scaling),
            **_step_times(rung_spec, device, scaling, micro, accum, effective, gpu_counts),
        )
    if latest_one is not None:
        what = f"one sample needs {latest_one / GIB:.2f} GiB with every change on the ladder"
    else:
        what = (
            f"weights, gradients and optimizer state alone need at least {floor / GIB:.2f} GiB "
            "with every change on the ladder"
        )
    sharded = offloaded = None
    worked_out = False
    if device.kind == "cuda":
        # NB: sharded with the requested optimizer (8-bit state under FSDP is not the usual
        # engine setup), on the ladder's last precision and checkpointing
        shard_spec = dataclasses.replace(
            rung_spec,
            optimizer=spec.optimizer,
            checkpointing=rung_spec.checkpointing and not cannot_checkpoint,
        )
        try:
            worked_out, sharded, offloaded = _beyond(shard_spec, device, cache, int(budget), worker)
        except SpecError as exc:
            if not shard_spec.checkpointing or spec.checkpointing:
                raise
            # NB: a model with no blocks to checkpoint is sharded without checkpointing
            if not cannot_checkpoint:
                skipped.append(f"no gradient checkpointing ({exc})")
            shard_spec = dataclasses.replace(shard_spec, checkpointing=False)
            worked_out, sharded, offloaded = _beyond(shard_spec, device, cache, int(budget))
    note = (
        f"{what}, over the {budget / GIB:.2f} GiB usable"
        + _beyond_words(device, worked_out, sharded, offloaded)
        + "".join(f"; {s}" for s in skipped)
    )
    return dataclasses.replace(
        _no_setting(device, Verdict.NO, note), sharded=sharded, offloaded=offloaded
    )


GPU_COUNTS = (2, 4, 8, 16)
"""Data-parallel GPU counts a plan times (those the effective batch splits over), with the
run's own count."""


def _step_times(
    spec: TrainSpec,
    device: Device,
    scaling: BatchScaling,
    micro: int,
    accum: int,
    effective: int,
    gpu_counts: tuple[int, ...],
) -> dict[str, object]:
    """DevicePlan's step_time, step_times and time_note for the chosen setting; each GPU
    count's step takes its share of the effective batch split as one GPU's is (the chosen
    micro-batch or less)."""
    try:
        one = _step_time(spec, device, scaling, micro, accum)
    except (RateMissing, SpecError) as exc:
        return {"time_note": f"step time not modelled: {exc}"}
    if one is None:
        return {"time_note": "step time not modelled: the probes' ops differ between batch sizes"}
    if device.kind != "cuda":
        return {"step_time": one}
    shares = []
    for n in gpu_counts:
        if effective % n:
            continue
        micro_n, accum_n = _split(effective // n, micro)
        step = _step_time(spec, device, scaling, micro_n, accum_n)
        if step is not None:
            shares.append((n, step))
    return {"step_time": one, "step_times": tuple(shares)}


def _step_time(
    spec: TrainSpec, device: Device, scaling: BatchScaling, micro: int, accum: int
) -> StepTime | None:
    """The modelled step time of a setting (None when the probes ran different ops; raises
    RateMissing where the catalog lacks a rate)."""
    costs = scaling.costs_at(micro)
    if costs is None:
        return None
    return step_time(
        costs,
        dataclasses.replace(spec, batch=micro, grad_accum=accum),
        device,
        scaling.base.tokens_per_sample,
        scaling.base.trainable_tensors,
    )


def with_measured_step(result: Plan, seconds: float, on: str) -> Plan:
    """`result` with every device's step time scaled by a step measured on device `on` with
    the setting the plan chose there ("measured" there, "calibrated" elsewhere)."""
    device = get_device(on)
    reference = next((d for d in result.devices if d.device == device.name), None)
    if reference is None or reference.step_time is None:
        raise SpecError(
            [
                f"--measured-on {on}: the plan has no modelled step time on {device.name}; "
                "plan that device too (--device), with a setting that fits"
            ]
        )

    def scale(step: StepTime) -> StepTime:
        return scaled(step, reference.step_time, seconds, on)

    devices = tuple(
        dataclasses.replace(
            d,
            step_time=scale(d.step_time),
            # NB: other micro-batches than the one measured: calibrated, not measured
            step_times=tuple(
                (n, dataclasses.replace(scale(t), label=CALIBRATED)) for n, t in d.step_times
            ),
        )
        if d.step_time is not None
        else d
        for d in result.devices
    )
    return dataclasses.replace(result, devices=devices)


def with_run(result: Plan, run: RunSpec) -> Plan:
    """`result` with each fitting device's run hours (on `run.gpus` of it) and costs, and the
    recommendations over every device."""
    devices = []
    lines: list[CostLine] = []
    for d in result.devices:
        if d.step_time is None or d.setting is None:
            devices.append(d)
            continue
        device = get_device(d.device)
        grad_bytes = result.trainable_parameters * d.setting.precision.param_dtype.itemsize
        per_gpu = {1: d.step_time, **dict(d.step_times)}

        def hours(
            n: int, step: StepTime, device: Device = device, grad_bytes: int = grad_bytes
        ) -> float:
            stage = Stage(name="train", epochs=run.epochs, step=step)
            # NB: the batch a step really takes (a prime effective batch rounds up)
            return run_time(
                [stage],
                step.micro_batch * step.grad_accum * n,
                dataclasses.replace(run, gpus=n),
                device,
                grad_bytes,
                result.tokens_per_sample,
            ).hours

        if run.gpus not in per_gpu:
            why = (
                "runs over several GPUs are planned for CUDA GPUs only"
                if device.kind != "cuda"
                else f"no step time for {run.gpus} GPUs"
            )
            devices.append(dataclasses.replace(d, time_note=why))
            continue
        step = per_gpu[run.gpus]
        estimate = run_estimate(
            [Stage(name="train", epochs=run.epochs, step=step)],
            step.micro_batch * step.grad_accum * run.gpus,
            run,
            device,
            grad_bytes,
            result.tokens_per_sample,
            hours_for={n: hours(n, step) for n, step in per_gpu.items()},
        )
        lines += estimate.costs
        devices.append(dataclasses.replace(d, run=estimate.time, costs=estimate.costs))
    return dataclasses.replace(
        result,
        devices=tuple(devices),
        run=run,
        recommendation=recommend(lines, run.deadline_hours) if lines else None,
    )


def _samples(count: int) -> str:
    return f"{count} sample{'s' if count > 1 else ''}"


def _beyond_words(
    device: Device, worked_out: bool, sharded: Sharded | None, offloaded: Offloaded | None
) -> str:
    """What would hold the job, in words (the tail of a does-not-fit note)."""
    if device.kind != "cuda":
        return "; it needs a GPU with more memory, or LoRA (not planned yet)"
    if not worked_out:
        return (
            "; what would hold it was not worked out (its one-sample step could not be traced): "
            "sharding over several GPUs, CPU offload or LoRA (not planned yet)"
        )
    if offloaded is None:  # NB: then no sharding fits either
        return (
            f"; sharding the model states over up to {SHARD_COUNTS[-1]} of these GPUs, or "
            "offloading them to CPU memory, would not make room for one sample (modelled): it "
            "needs a larger GPU, sequence or tensor parallelism, or LoRA (not planned yet)"
        )
    words = ""
    if sharded is not None:
        if sharded.instance:
            price = f" (${sharded.usd_per_hour:.2f}/h on demand)" if sharded.usd_per_hour else ""
            where = (
                f"; the cheapest catalog instance with them: {sharded.instances} x "
                f"{sharded.instance}{price}"
            )
        else:
            where = (
                f"; no catalog instance has {sharded.gpus} of this GPU (in one machine, or in "
                "machines of eight or more)"
            )
        words += (
            f"; it would fit {sharded.gpus} of these GPUs with the model states sharded (FSDP "
            f"full sharding or ZeRO-3; {sharded.precision.value}"
            + (", gradient checkpointing" if sharded.checkpointing else "")
            + f", {sharded.optimizer.value}), {sharded.per_gpu_bytes / GIB:.2f} GiB each at "
            f"{_samples(sharded.micro_batch)} per GPU (modelled){where}"
        )
    else:
        words += f"; sharding over up to {SHARD_COUNTS[-1]} of these GPUs would not (modelled)"
    return words + (
        f"; with the model states in CPU memory (FSDP2 CPU offload or ZeRO-Offload) one of "
        f"these GPUs would need {offloaded.gpu_bytes / GIB:.2f} GiB at "
        f"{_samples(offloaded.micro_batch)} and the host {offloaded.host_bytes / GIB:.1f} GiB of "
        "RAM for the states (modelled)"
    )


SHARD_COUNTS = (2, 4, 8, 16, 32, 64)
"""GPU counts the sharded verdict tries, smallest first."""


def _beyond(
    spec: TrainSpec,
    device: Device,
    cache: _Cache,
    budget: int,
    worker: _LadderWorker | None = None,
) -> tuple[bool, Sharded | None, Offloaded | None]:
    """What would hold `spec` at one sample when one `device` cannot: whether it could be
    worked out (a step that cannot be traced at one sample or at the scaling's base batch
    cannot), the fewest such GPUs with the model states sharded across them (None when none
    up to SHARD_COUNTS[-1] do), and one GPU with the states offloaded to CPU memory (None when
    that does not fit either)."""
    needs = worker.beyond(device.name) if worker is not None else None
    if needs is None:
        needs = _beyond_needs(spec, device, cache, budget)
    if needs is None:
        return False, None, None
    offload_bytes, shards, micro = needs
    if offload_bytes is None:
        return True, None, None
    host = model_states(spec, _counts(spec, cache)).total()
    offloaded = Offloaded(gpu_bytes=offload_bytes, host_bytes=host, micro_batch=micro)
    if shards is None:
        return True, None, offloaded
    gpus, per_gpu = shards
    name, count, price = cheapest_instance(device, gpus)
    sharded = Sharded(
        gpus=gpus,
        per_gpu_bytes=per_gpu,
        precision=spec.precision,
        checkpointing=spec.checkpointing,
        optimizer=spec.optimizer,
        micro_batch=micro,
        instance=name,
        instances=count,
        usd_per_hour=price,
    )
    return True, sharded, offloaded


_Needs = tuple[int | None, tuple[int, int] | None, int]
"""Device memory with the states offloaded (None: does not fit), the fewest GPUs that fit
sharded and their memory each (None: none up to SHARD_COUNTS[-1]), and the micro-batch."""


def _beyond_needs(spec: TrainSpec, device: Device, cache: _Cache, budget: int) -> _Needs | None:
    """The device memory figures behind `_beyond` (see `_Needs`): one trace at one sample,
    replayed with what scales with the parameters divided among the GPUs (`_per_gpu`)."""
    try:
        trace, at = _trace_at_one(spec, device, cache)
    except TraceError:
        return None
    per_gpu = _per_gpu(trace, at, device, cache)

    on_gpu = per_gpu(0)
    if on_gpu > budget:
        # NB: no share of the states leaves less on a GPU than none of them
        return None, None, at.batch
    # NB: fewer bytes per GPU with more GPUs: the fewest that fit, by bisection
    low, high = -1, len(SHARD_COUNTS)
    needed: dict[int, int] = {}
    while high - low > 1:
        middle = (low + high) // 2
        needed[middle] = per_gpu(SHARD_COUNTS[middle])
        if needed[middle] <= budget:
            high = middle
        else:
            low = middle
    if high == len(SHARD_COUNTS):
        return on_gpu, None, at.batch
    return on_gpu, (SHARD_COUNTS[high], needed[high]), at.batch


def _per_gpu(
    trace: StepTrace, at: TrainSpec, device: Device, cache: _Cache
) -> Callable[[int], int]:
    """Device memory of `trace` (of `at`) on `device` with the bytes that scale with the
    parameters divided among `share` GPUs (1: all on one GPU; 0: none on the GPU).

    NB: what scales: the states, autocast's cached low-precision copies of the weights (a
    sharded engine's mixed-precision policy replaces them with one layer's gathered weights at
    a time) and the optimizer step's temporaries (the foreach path's copies of whole states).
    Sharded or offloaded, NCCL's own buffers are added (measured). Not modelled: the engine's
    gathered weights and unsharded gradients of the unit being computed (the root unit, with
    the embeddings, is the largest), which the H200 check shows as an under-estimate that grows
    with the vocabulary (benchmarks/sharded/).
    """
    names = trace.category_names()
    states = {
        Category.PARAMETERS.value,
        Category.GRADIENTS.value,
        Category.OPTIMIZER_STATE.value,
    }
    scales = [
        name in states
        or (name is not None and (event.phase is Phase.OPTIMIZER or event.op == WEIGHT_CAST))
        for name, event in zip(names, trace.events, strict=True)
    ]
    workspace = cublas_workspace_bytes(device.compute_capability)

    def per_gpu(share: int) -> int:
        # NB: the replay depends on the device only through its runtime profile and cuBLAS
        # workspace: GPUs of one kernel family and profile share it
        memo = ("beyond", _key(at, device), at.batch, device.runtime_profile, workspace, share)
        if memo not in cache.replays:
            sizes = [
                (-(-event.nbytes // share) if share else 0) if scaled else event.nbytes
                for event, scaled in zip(trace.events, scales, strict=True)
            ]
            result, context = gpu_memory(trace, at, device, sizes=sizes)
            # NB: sharded or offloaded, the step runs under torch.distributed: NCCL's buffers
            distributed = nccl_bytes(max(share, 1)) if share != 1 else 0
            cache.replays[memo] = result.peak_reserved_bytes + context + distributed
        return cache.replays[memo]

    return per_gpu


def beyond_one_gpu(spec: TrainSpec, device: Device, gpus: int) -> int:
    """Device memory per GPU that the plan's does-not-fit verdict gives `spec` at its
    micro-batch with the model states sharded over `gpus` GPUs like `device` (1: unsharded,
    the estimate's figure; 0: the states in CPU memory, one GPU). Modelled: see `_per_gpu`."""
    if device.kind != "cuda":
        raise SpecError([f"device {device.name!r}: sharding is modelled for CUDA GPUs only"])
    at = dataclasses.replace(spec, device=device.name)
    trace = trace_step(at, target=Target.of(device))
    return _per_gpu(trace, at, device, _Cache())(gpus)


def _doomed(
    spec: TrainSpec, devices: list[Device], margin: float, auto_precision: bool, cache: _Cache
) -> list[tuple[TrainSpec, Device, int]]:
    """The GPUs whose model states alone exceed the budget at every rung (they will not fit:
    what would is worked out for them), each with the setting and budget `_beyond` takes."""
    doomed = []
    for device in devices:
        budget = int((1.0 - margin) * device.memory_bytes)
        rungs = _rungs(spec, device, auto_precision)
        if all(_floor(r, device, cache) > budget for r, _ in rungs):
            shard_spec = dataclasses.replace(rungs[-1][0], optimizer=spec.optimizer)
            doomed.append((shard_spec, device, budget))
    return doomed


def _trace_at_one(spec: TrainSpec, device: Device, cache: _Cache) -> tuple[StepTrace, TrainSpec]:
    """A trace of one sample of `spec` on `device` and its spec, kept in `cache.ones` for the
    setting's scaling and for copies of its passes; for a model that cannot train on one sample
    (BatchNorm), a trace at the scaling's base batch (not kept). TraceError when that fails
    too."""
    key = _key(spec, device)
    one = dataclasses.replace(spec, batch=1, device=device.name)
    if key in cache.scalings:
        return cache.scalings[key].trace_at(1), one
    if key not in cache.ones:
        source = next((t for k, t in cache.ones.items() if _passes_alike(k, key)), None)
        if source is None and (other := _other_optimizer(spec, device, cache)) is not None:
            source = other.trace_at(1)
        try:
            cache.ones[key] = trace_step(one, target=Target.of(device), passes_from=source)
        except TraceError:  # NB: BatchNorm cannot train on one sample
            base = dataclasses.replace(spec, batch=PROBES[0], device=device.name)
            return trace_step(base, target=Target.of(device)), base
    return cache.ones[key], one


def _no_setting(device: Device, verdict: Verdict, note: str) -> DevicePlan:
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


def _with_split(
    changes: tuple[str, ...], micro: int, accum: int, effective: int
) -> tuple[str, ...]:
    """`changes` plus the batch split, when it is not one step of the effective batch."""
    if accum > 1:
        changes = (*changes, f"micro-batch {micro} x {accum} accumulation steps")
    if micro * accum != effective:
        changes = (*changes, f"effective batch {micro * accum} (not {effective})")
    return changes


def _plan_cpu(spec: TrainSpec, effective: int, device: Device, margin: float) -> DevicePlan:
    """The CPU as the device: fp32 (then checkpointing) in this host's RAM, or the RAM of a
    user catalog's CPU row; every micro-batch tried is a full CPU estimate (peak resident
    memory, `trainfit.estimator.cpu`), searched by bisection up to the effective batch."""
    from trainfit.estimator.cpu import estimate_cpu
    from trainfit.hardware.host import total_ram_bytes

    ram = device.memory_bytes or total_ram_bytes()
    if not ram:
        return _no_setting(
            device,
            Verdict.NOT_ESTIMATED,
            "this host's RAM could not be detected: give it in a user catalog's cpu row",
        )
    budget = int((1.0 - margin) * ram)
    base = dataclasses.replace(spec, precision=Precision.FP32, device=device.name)
    rungs = [(base, ())]
    if not base.checkpointing:
        rungs.append((dataclasses.replace(base, checkpointing=True), ("gradient checkpointing",)))
    where = "this host's" if not device.memory_bytes else "the catalog's"
    one_needed = 0
    for rung_spec, changes in rungs:
        known: dict[int, int] = {}

        def needed(batch: int, rung_spec: TrainSpec = rung_spec, known: dict = known) -> int:
            if batch not in known:
                at = dataclasses.replace(rung_spec, batch=batch)
                known[batch] = estimate_cpu(at, device, 0.0).device_memory_needed_bytes
            return known[batch]

        smallest = 1
        try:
            try:
                one_needed = needed(1)
            except TraceError:
                # NB: a model that cannot train on one sample (BatchNorm) starts at two
                smallest = 2
                one_needed = needed(2)
        except SpecError:
            if not rung_spec.checkpointing or spec.checkpointing:
                raise
            continue
        if one_needed > budget or smallest > effective:
            continue
        found = _largest(needed, budget, effective, smallest)
        micro, accum = _split(effective, found)
        changes = _with_split(changes, micro, accum, effective)
        if spec.precision is not Precision.FP32:
            changes = ("fp32 (no mixed precision planned on the CPU)", *changes)
        tiers = []
        for name, share in TIERS:
            fit = (
                _largest(needed, int(share * ram), effective, smallest)
                if one_needed <= share * ram
                else 0
            )
            t_micro, t_accum = _split(effective, fit) if fit else (0, 0)
            tiers.append(
                Tier(
                    name=name,
                    share=share,
                    micro_batch=t_micro,
                    grad_accum=t_accum,
                    needed_bytes=needed(t_micro) if t_micro else 0,
                )
            )
        return DevicePlan(
            device=device.name,
            display=device.display,
            verdict=Verdict.COMFORTABLE if not changes else Verdict.WITH_CHANGES,
            setting=Setting(
                precision=rung_spec.precision,
                checkpointing=rung_spec.checkpointing,
                optimizer=rung_spec.optimizer,
                micro_batch=micro,
                grad_accum=accum,
                needed_bytes=needed(micro),
            ),
            changes=changes,
            max_micro_batch=found,
            tiers=tuple(tiers),
            note=f"sized by {where} RAM, {ram / GIB:.1f} GiB; the search stops at the "
            "effective batch",
        )
    return _no_setting(
        device,
        Verdict.NO,
        f"one sample needs {one_needed / GIB:.1f} GiB of RAM with checkpointing, over the "
        f"{budget / GIB:.1f} GiB usable of {where} {ram / GIB:.1f} GiB",
    )


def _largest(needed: Callable[[int], int], budget: int, limit: int, low: int = 1) -> int:
    """The largest batch up to `limit` whose need is within `budget` (batch `low` fits): gallop
    from `low` by doubling, then bisect (the need is taken to grow with the batch)."""
    high = 2 * low
    while high <= limit and needed(high) <= budget:
        low, high = high, 2 * high
    if high > limit:
        if needed(limit) <= budget:
            return limit
        high = limit
    while high - low > 1:
        middle = (low + high) // 2
        if needed(middle) <= budget:
            low = middle
        else:
            high = middle
    return low


def _floor(spec: TrainSpec, device: Device, cache: _Cache) -> int:
    """Device memory no micro-batch of `spec` can go under on `device` (model states plus the
    smallest runtime context): settings above the budget are skipped without a trace."""
    states = model_states(spec, _counts(spec, cache))
    if device.kind != "cuda":
        return states.total()  # NB: an Apple GPU's runtime buffers are not modelled
    profile = PROFILES[device.runtime_profile]
    return states.total() + context_bytes(profile, uses_cublas=False, reduced_precision=False)


def _counts(spec: TrainSpec, cache: _Cache) -> tuple[int, int]:
    if cache.counts is None:
        cache.counts = parameter_counts(spec)
    return cache.counts


def _model_parameters(spec: TrainSpec, cache: _Cache) -> int:
    """The model's parameters, without a DPO reference copy (which the counts include, as its
    weights take memory)."""
    total = _counts(spec, cache)[0]
    if spec.preference is not None and spec.reference is ReferenceKind.MODEL:
        return total // 2  # NB: the reference is a deep copy of the policy: as many elements
    return total


def _max(spec: TrainSpec, margin: float, scaling: BatchScaling) -> int:
    return max_micro_batch(spec, margin=margin, scaling=scaling).batch


def _tiers(spec: TrainSpec, effective: int, scaling: BatchScaling) -> tuple[Tier, ...]:
    tiers = []
    for name, share in TIERS:
        found = max_micro_batch(spec, margin=1.0 - share, limit=effective, scaling=scaling)
        if found.batch < 1:
            tiers.append(Tier(name=name, share=share, micro_batch=0, grad_accum=0, needed_bytes=0))
            continue
        micro, accum = _split(effective, found.batch)
        tiers.append(
            Tier(
                name=name,
                share=share,
                micro_batch=micro,
                grad_accum=accum,
                needed_bytes=scaling.needed_bytes(micro),
            )
        )
    return tuple(tiers)


def _needed_once(spec: TrainSpec, micro: int, device: Device, cache: _Cache) -> int:
    """Device memory needed at one micro-batch: from a cached scaling, else one trace."""
    if _key(spec, device) in cache.scalings or _same_trace(spec, device, cache) is not None:
        return _scaling(spec, device, cache).needed_bytes(micro)
    at = dataclasses.replace(spec, batch=micro, device=device.name)
    source = _other_optimizer(spec, device, cache)
    trace = trace_step(
        at,
        target=Target.of(device),
        passes_from=source.trace_at(micro) if source is not None else None,
    )
    result, context = gpu_memory(trace, at, device)
    return result.peak_reserved_bytes + context


def _ladder_steps(
    spec: TrainSpec, effective: int, device: Device
) -> list[tuple[str, TrainSpec, int]]:
    """Seed 004's ladder: each change with the setting and micro-batch it runs at."""
    fp32 = dataclasses.replace(spec, precision=Precision.FP32, checkpointing=False)
    amp = dataclasses.replace(fp32, precision=supported_precision(device))
    quarter = max(1, effective // 4)
    steps: list[tuple[str, TrainSpec, int]] = [
        (f"fp32, {effective} samples per step", fp32, effective),
        (f"{amp.precision.value} mixed precision", amp, effective),
        (f"{quarter} samples per step with accumulation", amp, quarter),
        ("gradient checkpointing", dataclasses.replace(amp, checkpointing=True), quarter),
    ]
    last_spec = steps[-1][1]
    if last_spec.optimizer in (OptimizerKind.ADAMW, OptimizerKind.ADAM):
        eight = dataclasses.replace(last_spec, optimizer=OptimizerKind.ADAMW_8BIT)
        steps.append(("8-bit AdamW state", eight, quarter))
        last_spec = eight
    steps.append(("1 sample per step with accumulation", last_spec, 1))
    return steps


def _ladder(
    spec: TrainSpec,
    effective: int,
    device: Device,
    cache: _Cache,
    worker: _LadderWorker | None = None,
) -> tuple[Rung, ...]:
    """Seed 004's ladder on `device`: each change's memory at the same effective batch."""
    rungs: list[Rung] = []
    before = 0
    for index, (change, rung_spec, micro) in enumerate(_ladder_steps(spec, effective, device)):
        needed = None
        if (
            worker is not None
            and not _traced(rung_spec, device, cache)
            and _other_optimizer(rung_spec, device, cache) is None
        ):
            needed = worker.needed(index)
        try:
            if needed is None:
                needed = _needed_once(rung_spec, micro, device, cache)
        except SpecError:
            if not rung_spec.checkpointing or spec.checkpointing:
                raise
            continue  # NB: a model with no blocks to checkpoint skips that rung
        except TraceError:
            if micro > 1:
                raise
            continue  # NB: a model that cannot train on one sample (BatchNorm) skips that rung
        rungs.append(
            Rung(
                change=change,
                micro_batch=micro,
                grad_accum=math.ceil(effective / micro),
                needed_bytes=needed,
                saved_bytes=before - needed if rungs else 0,
            )
        )
        before = needed
    return tuple(rungs)


WORKER_PARAMETERS = 1_000_000_000
"""Parameters from which the ladder is traced in a worker (a trace then takes over a second
on a laptop core, and the ladder's few traces outlast the worker's start-up)."""


def _traced(spec: TrainSpec, device: Device, cache: _Cache) -> bool:
    return _key(spec, device) in cache.scalings or _same_trace(spec, device, cache) is not None


class _LadderWorker:
    """The ladder's steps, each traced and replayed in one worker process, in order.

    NB: a fresh interpreter (spawn, the default on macOS and safe beside torch's threads)
    imports the model's code again; a step it cannot do (a model defined in `__main__`, a
    user catalog given on the command line) comes back as None and is done here instead.
    """

    def __init__(
        self,
        steps: list[tuple[str, TrainSpec, int]],
        device: Device,
        doomed: list[tuple[TrainSpec, Device, int]] | None = None,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
        # NB: the steps from the 8-bit optimizer on are the plan's own settings, which it has
        # usually traced by the time the ladder is read: those are left to this process
        self._futures = [
            self._pool.submit(
                _needed_in_worker, dataclasses.replace(s, batch=micro, device=device.name), device
            )
            for _, s, micro in steps
            if s.optimizer is not OptimizerKind.ADAMW_8BIT
        ]
        # NB: then what would hold the job on the GPUs that cannot (the ladder's traces are
        # done by then, and the worker idles while the devices are planned here)
        self._beyond = {
            d.name: self._pool.submit(_beyond_in_worker, s, d, budget)
            for s, d, budget in doomed or []
        }

    def beyond(self, name: str) -> _Needs | None:
        """`_beyond_needs` of a doomed device, or None (not given to the worker, failed, or
        not worked out there)."""
        future = self._beyond.get(name)
        if future is None:
            return None
        try:
            return future.result()
        except Exception:  # NB: worked out again in this process
            return None

    def needed(self, index: int) -> int | None:
        if index >= len(self._futures):
            return None
        try:
            return self._futures[index].result()
        except Exception:  # the step is done again in this process
            return None

    def close(self) -> None:
        """Stop the worker, mid-trace or not, and wait until it has exited."""
        for future in [*self._futures, *self._beyond.values()]:
            future.cancel()
        # NB: a step still being traced is not needed any more; the process is ended rather
        # than waited for (ProcessPoolExecutor has no public way before Python 3.14)
        for process in list(getattr(self._pool, "_processes", {}).values()):
            process.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)


_WORKER_CACHE = _Cache()
"""The worker process's traces and replays, shared by the doomed devices it is given."""


def _beyond_in_worker(spec: TrainSpec, device: Device, budget: int) -> _Needs | None:
    return _beyond_needs(spec, device, _WORKER_CACHE, budget)


def _needed_in_worker(spec: TrainSpec, device: Device) -> int | None:
    """Device memory needed by `spec` on `device` (a full trace), or None when it fails."""
    try:
        trace = trace_step(spec, target=Target.of(device))
        result, context = gpu_memory(trace, spec, device)
    except Exception:  # the main process does the step again and reports it
        return None
    return result.peak_reserved_bytes + context
