"""Beyond one GPU: each CUDA GPU's multi-GPU plan (`trainfit.distributed`: the fewest GPUs,
the engine, per-rank memory with its gathered units and buffers), and for a GPU that cannot
hold the job alone, what would, taken from that plan (`Sharded`, `Offloaded`).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Protocol

from trainfit.distributed.search import DistributedPlan, SharedTraces, plan_distributed
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.hardware.catalog import Device, DeviceKind, get_device
from trainfit.plan.ladder import supported_precision
from trainfit.plan.options import DevicePlan, NoMultiGpu, Offloaded, Plan, Sharded, Verdict
from trainfit.progress import Part, tell
from trainfit.spec import OptimizerKind, Precision
from trainfit.trace.kernels.attention import kernel_family


def with_distributed(
    result: Plan,
    precision: Precision | None,
    margin: float,
    strategy: Strategy | None,
    offload: Offload | None,
    gpus: int | None,
    nodes: int | None,
    every: bool,
    shared: SharedTraces | None = None,
    worker: Elsewhere | None = None,
) -> Plan:
    """`result` with each CUDA GPU's multi-GPU plan (`trainfit.distributed.plan_distributed`):
    every CUDA GPU when `every`, else those that do not fit alone. `shared`: traces of the job
    already made (`trainfit.plan.traces.shared_traces`), kept for the GPUs of one kernel family
    to share. `worker`: where the plans of the GPUs outside the largest kernel family among
    them are made meanwhile (`trainfit.plan.worker.LadderWorker.search`: the same plans)."""
    shared = shared or SharedTraces()
    searched: dict[int, tuple[object, ...]] = {}  # NB: plan_distributed's arguments
    for index, d in enumerate(result.devices):
        device = get_device(d.device)
        cuda = device.kind is DeviceKind.CUDA and bool(device.memory_bytes)
        if cuda and (every or d.verdict is Verdict.NO):
            chosen = d.setting.precision if d.setting is not None else None
            spec = dataclasses.replace(
                result.spec,
                device=device.name,
                precision=precision or chosen or supported_precision(device),
            )
            batch = result.effective_batch
            searched[index] = (spec, batch, device, margin, strategy, offload, gpus, nodes)
    elsewhere = {
        index: worker.search(arguments)
        for index, arguments in _elsewhere(searched).items()
        if worker is not None
    }
    found: dict[int, DistributedPlan | None] = {}
    # NB: this process's own searches first, while the worker makes the others
    for index in sorted(searched, key=lambda i: i in elsewhere):
        arguments = searched[index]
        device = arguments[2]
        assert isinstance(device, Device)
        tell(
            Part.DEVICE,
            f"{device.name} over several GPUs",
            index=index + 1,
            total=len(result.devices),
        )
        made = _made_elsewhere(elsewhere.get(index))
        if made is _NOT_MADE:
            made = plan_distributed(*arguments, shared)  # type: ignore[arg-type]
        assert made is None or isinstance(made, DistributedPlan)
        found[index] = made
    optimizer = result.spec.optimizer  # NB: each search's spec differs in device, precision
    missing = NoMultiGpu(strategy=strategy, offload=offload, gpus=gpus, nodes=nodes)
    devices = [
        d if index not in found else _with(d, found[index], optimizer, missing)
        for index, d in enumerate(result.devices)
    ]
    return dataclasses.replace(result, devices=tuple(devices))


class Elsewhere(Protocol):
    """A process that makes a multi-GPU plan meanwhile (`LadderWorker`)."""

    def search(self, arguments: tuple[object, ...]) -> Future[DistributedPlan | None]: ...


_NOT_MADE = object()


def _elsewhere(searched: dict[int, tuple[object, ...]]) -> dict[int, tuple[object, ...]]:
    """The searches (`plan_distributed`'s arguments by device index) of the GPUs outside the
    kernel family with the most GPUs among them (the first such family on a tie): the GPUs of
    one family share their traces (`SharedTraces`), and each family traces its own steps."""
    families: dict[object, list[int]] = {}
    for index, arguments in searched.items():
        device = arguments[2]
        assert isinstance(device, Device)
        families.setdefault(kernel_family(device.compute_capability), []).append(index)
    if len(families) < 2:
        return {}
    kept = max(families.values(), key=len)
    return {i: a for i, a in searched.items() if i not in kept}


def _made_elsewhere(future: Future[DistributedPlan | None] | None) -> object:
    """The plan made elsewhere, or `_NOT_MADE` (none asked, or it failed: it is made here
    again, where a failure is reported as it would have been)."""
    if future is None:
        return _NOT_MADE
    try:
        return future.result()
    except Exception:
        return _NOT_MADE


def _with(
    d: DevicePlan, found: DistributedPlan | None, optimizer: OptimizerKind, missing: NoMultiGpu
) -> DevicePlan:
    """`d` with its multi-GPU plan (`missing` where none), and, where `d` does not fit, what
    would hold the job."""
    if found is None:
        return dataclasses.replace(d, distributed=None, no_multi_gpu=missing)
    d = dataclasses.replace(d, distributed=found, no_multi_gpu=None)
    if d.verdict is Verdict.NO:
        d = dataclasses.replace(d, sharded=_sharded(found, optimizer), offloaded=_offloaded(found))
    return d


def _sharded(found: DistributedPlan, optimizer: OptimizerKind) -> Sharded | None:
    """The multi-GPU plan as sharded states over several GPUs (None: DDP, or offloaded)."""
    if found.strategy is Strategy.DDP or found.offload is not Offload.NONE:
        return None
    return Sharded(
        gpus=found.gpus,
        per_gpu_bytes=found.memory.total_bytes,
        precision=found.precision,
        checkpointing=found.checkpointing,
        optimizer=optimizer,
        micro_batch=found.micro_batch,
        instance=found.instance,
        instances=found.instances,
        usd_per_hour=found.usd_per_hour,
    )


def _offloaded(found: DistributedPlan) -> Offloaded | None:
    """One GPU with the states in CPU memory, when the multi-GPU plan has that (as its
    choice, or as the fewest GPUs with offload)."""
    one = found if found.gpus == 1 and found.offload is not Offload.NONE else None
    fewer = found.fewer_with_offload
    one = one or (fewer if fewer is not None and fewer.gpus == 1 else None)
    if one is None:
        return None
    return Offloaded(
        gpu_bytes=one.memory.total_bytes,
        host_bytes=one.memory.host_bytes_per_node,
        micro_batch=one.micro_batch,
    )
