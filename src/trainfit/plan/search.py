"""`plan()`: for each device, the settings that fit, a verdict, tiers and the low-memory ladder.

For each device the step is tried on the ladder's settings, cheapest first
(`trainfit.plan.ladder`): the precision the device supports (bf16 from Ampere on, else fp16
with loss scaling), then gradient checkpointing, then 8-bit AdamW state. On the first rung
where at least one sample fits inside the safety margin, the micro-batch is the largest that
fits up to the effective batch, and gradient accumulation makes up the rest. Every figure is a
full estimate (trace, allocator replay, runtime context), replayed per micro-batch from
`trainfit.estimator.scaling`.

The CPU as a device is planned in fp32 (then with checkpointing) against the host's RAM (or a
user catalog's cpu row), each micro-batch tried a full CPU estimate (`trainfit.plan.cpu`).

A CUDA GPU that cannot hold the job alone (every CUDA GPU, with --strategy/--gpus/--nodes) is
also planned over several of it by `trainfit.distributed` (`DevicePlan.distributed`,
`trainfit.plan.beyond`).

An Apple GPU is planned in fp32 first, then fp16 autocast (`trainfit.plan.ladder`). Devices of
one compute-capability family share traces. Known limitation: LoRA/QLoRA is planned when the
spec asks for it, never proposed as a change of the ladder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from trainfit.distributed.strategy import Layout, Offload, Strategy, check_batch
from trainfit.errors import SpecError
from trainfit.estimator.scaling import BatchScaling
from trainfit.hardware.catalog import Device, DeviceKind, device_names, get_device
from trainfit.models.live_names import is_live
from trainfit.plan.beyond import with_distributed
from trainfit.plan.device import plan_device
from trainfit.plan.ladder import ladder_rungs, ladder_steps
from trainfit.plan.options import DEFAULT_MARGIN, DevicePlan, Plan
from trainfit.plan.times import GPU_COUNTS, with_measured_step, with_run
from trainfit.plan.traces import (
    TraceCache,
    counts,
    model_parameters,
    scaling_for,
    shared_traces,
    traced,
)
from trainfit.plan.worker import WORKER_PARAMETERS, LadderWorker, worth_starting
from trainfit.progress import Part, Reporter, reporting, tell
from trainfit.spec import Precision, TrainSpec
from trainfit.timing.run import RunSpec
from trainfit.trace.collector import collector_paused


def plan(
    spec: TrainSpec,
    effective_batch: int,
    devices: str | Sequence[str],
    margin: float = DEFAULT_MARGIN,
    precision: Precision | None = None,
    ladder: bool = True,
    jobs: int = 1,
    run: RunSpec | None = None,
    measured_step: tuple[float, str] | None = None,
    progress: Reporter | None = None,
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
    the devices are planned, and the worker then makes the multi-GPU plans of the GPUs outside
    the kernel family with the most GPUs among those searched (same figures; a worker's
    start-up costs a few seconds of a core); a live model's (`trainfit.models.live`) is
    traced in this process.
    `run` (data size, epochs, prices) adds each device's run hours and costs and the
    recommendations (`with_run`); `measured_step` (seconds, device) scales every step time by
    a step measured with the plan's setting on that device (`with_measured_step`).
    `progress` (else the reporter in effect, `trainfit.progress`) is told each device as its
    planning starts, each rung of the ladder and each traced step.

    `strategy`, `offload`, `gpus` and `nodes` (or `multi_gpu`) plan every CUDA GPU over
    several of it (`with_distributed`); without them only the GPUs that cannot hold the job
    alone are.
    """
    if not isinstance(spec, TrainSpec):
        raise SpecError(
            [f"plan takes a TrainSpec, got {type(spec).__name__}: plan(TrainSpec(model=...), ...)"]
        )
    devices = device_names(devices)
    # NB: the collector paused for the plan, as the CLI pauses it for its run: a plan keeps
    # tens of thousands of events per trace, which each collection walks; no figure changes
    with reporting(progress), collector_paused():
        return _plan(
            spec, effective_batch, devices, margin, precision, ladder, jobs, run, measured_step,
            strategy, offload, gpus, nodes, multi_gpu,
        )  # fmt: skip


def _plan(
    spec: TrainSpec,
    effective_batch: int,
    devices: tuple[str, ...],
    margin: float,
    precision: Precision | None,
    ladder: bool,
    jobs: int,
    run: RunSpec | None,
    measured_step: tuple[float, str] | None,
    strategy: Strategy | None,
    offload: Offload | None,
    gpus: int | None,
    nodes: int | None,
    multi_gpu: bool,
) -> Plan:
    resolved = _checked(effective_batch, devices, margin, precision, jobs, run, gpus, nodes)
    if precision is not None:
        spec = dataclasses.replace(spec, precision=precision)
    cache = TraceCache()
    cuda = [d for d in resolved if d.kind is DeviceKind.CUDA and d.memory_bytes]
    worker = None
    # NB: a live model's import path resolves in this process only: its ladder is traced here
    in_worker = jobs > 1 and not is_live(spec.model)
    if ladder and cuda and in_worker and sum(counts(spec, cache)) >= WORKER_PARAMETERS:
        steps = [(s.spec, s.micro_batch) for s in ladder_steps(spec, effective_batch, cuda[0])]
        if worth_starting(steps, cuda[0]):  # NB: else kept traces are read back here
            worker = LadderWorker(steps, cuda[0])
    try:
        return _planned(
            spec, effective_batch, resolved, margin, precision, ladder, cache, worker, run,
            measured_step, strategy, offload, gpus, nodes, multi_gpu,
        )  # fmt: skip
    finally:
        if worker is not None:
            worker.close()


def _planned(
    spec: TrainSpec,
    effective_batch: int,
    resolved: list[Device],
    margin: float,
    precision: Precision | None,
    ladder: bool,
    cache: TraceCache,
    worker: LadderWorker | None,
    run: RunSpec | None,
    measured_step: tuple[float, str] | None,
    strategy: Strategy | None,
    offload: Offload | None,
    gpus: int | None,
    nodes: int | None,
    multi_gpu: bool,
) -> Plan:
    """`_plan`'s plan, its worker (if any) started."""
    cuda = [d for d in resolved if d.kind is DeviceKind.CUDA and d.memory_bytes]
    gpu_counts = tuple(sorted({*GPU_COUNTS, run.gpus} - {1})) if run is not None else GPU_COUNTS
    plans = tuple(
        plan_device(
            spec, effective_batch, d, margin, precision is None, cache, gpu_counts=gpu_counts
        )
        for d in _announced(resolved)
    )
    result = Plan(
        spec=spec, effective_batch=effective_batch, margin=margin, devices=plans, ladder=(),
        ladder_device="",
    )  # fmt: skip
    if measured_step is not None:
        result = with_measured_step(result, *measured_step)
    asked = multi_gpu or any(x is not None for x in (strategy, offload, gpus, nodes))
    # NB: the multi-GPU plans before the ladder, so that this process makes its own searches
    # while a worker still traces its ladder steps, and reads them done afterwards. The
    # ladder adds no trace to `cache` that the searches start from (`shared_traces`: its
    # steps are traced once, uncached, or read from the scalings the devices made)
    result = with_distributed(
        result, precision, margin, strategy, offload, gpus, nodes, every=asked,
        shared=shared_traces(spec, cache), worker=worker,
    )  # fmt: skip
    rungs = ()
    if ladder and cuda:
        rungs = ladder_rungs(spec, effective_batch, cuda[0], cache, worker)
    result = dataclasses.replace(
        result,
        ladder=rungs,
        ladder_device=cuda[0].name if ladder and cuda else "",
        trainable_parameters=counts(spec, cache)[1],
        tokens_per_sample=next((s.base.tokens_per_sample for s in cache.scalings.values()), None),
        parameters=model_parameters(spec, cache),
        scalings=_chosen_scalings(spec, resolved, plans, cache),
    )
    return with_run(result, run) if run is not None and run.sized else result


def _checked(
    effective_batch: int,
    devices: tuple[str, ...],
    margin: float,
    precision: Precision | None,
    jobs: int,
    run: RunSpec | None,
    gpus: int | None,
    nodes: int | None,
) -> list[Device]:
    """The devices of a plan, after every problem with its arguments is raised at once."""
    if gpus is not None or nodes is not None:
        check_batch(
            effective_batch,
            Layout(gpus=gpus if gpus is not None else (nodes or 1) * 8, nodes=nodes or 1),
        )
    if not isinstance(effective_batch, int) or isinstance(effective_batch, bool):
        raise SpecError([f"effective batch must be a positive integer, got {effective_batch!r}"])
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
    _check_precision(precision, resolved)
    return resolved


def _check_precision(precision: Precision | None, devices: list[Device]) -> None:
    """SpecError when a precision given for every device is one some of them lack."""
    if precision in (Precision.BF16, Precision.PURE_BF16):
        lacking = [d.name for d in devices if d.kind is DeviceKind.CUDA and not d.has_bf16]
        if lacking:
            raise SpecError(
                [
                    f"{precision.value} is not supported on {', '.join(lacking)} (no bf16 before "
                    "compute capability 8.0): use fp16, or leave the precision to the plan"
                ]
            )
    if precision is Precision.TF32:
        macs = [d.name for d in devices if d.kind is DeviceKind.MPS]
        if macs:
            raise SpecError(
                [
                    f"tf32 is a CUDA setting, not available on {', '.join(macs)}: use fp32, "
                    "fp16 or bf16 there, or leave the precision to the plan"
                ]
            )


def _announced(devices: list[Device]) -> Iterator[Device]:
    """`devices`, telling the reporter in effect of each as it is reached."""
    for index, d in enumerate(devices, start=1):
        tell(Part.DEVICE, d.name, index=index, total=len(devices))
        yield d


def _chosen_scalings(
    spec: TrainSpec, devices: list[Device], plans: tuple[DevicePlan, ...], cache: TraceCache
) -> dict[str, BatchScaling]:
    """The cached scaling of each GPU's chosen setting (no new trace: the plan made them)."""
    found = {}
    for device, d in zip(devices, plans, strict=True):
        s = d.setting
        if s is None or device.kind not in (DeviceKind.CUDA, DeviceKind.MPS):
            continue
        chosen = dataclasses.replace(
            spec, precision=s.precision, checkpointing=s.checkpointing, optimizer=s.optimizer
        )
        if traced(chosen, device, cache):
            found[device.name] = scaling_for(chosen, device, cache)
    return found
