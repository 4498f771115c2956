"""Beyond one GPU: each CUDA GPU's multi-GPU plan (`trainfit.distributed`: the fewest GPUs,
the engine, per-rank memory with its gathered units and buffers), and for a GPU that cannot
hold the job alone, what would, taken from that plan (`Sharded`, `Offloaded`).
"""

from __future__ import annotations

import dataclasses

from trainfit.distributed.search import DistributedPlan, SharedTraces, plan_distributed
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.plan.ladder import supported_precision
from trainfit.plan.options import NoMultiGpu, Offloaded, Plan, Sharded, Verdict
from trainfit.progress import Part, tell
from trainfit.spec import OptimizerKind, Precision


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
) -> Plan:
    """`result` with each CUDA GPU's multi-GPU plan (`trainfit.distributed.plan_distributed`):
    every CUDA GPU when `every`, else those that do not fit alone. `shared`: traces of the job
    already made (`trainfit.plan.traces.shared_traces`), kept for the GPUs of one kernel family
    to share."""
    devices = []
    shared = shared or SharedTraces()
    for index, d in enumerate(result.devices, start=1):
        device = get_device(d.device)
        if (
            device.kind is not DeviceKind.CUDA
            or not device.memory_bytes
            or (not every and d.verdict is not Verdict.NO)
        ):
            devices.append(d)
            continue
        tell(
            Part.DEVICE, f"{device.name} over several GPUs", index=index, total=len(result.devices)
        )
        chosen = d.setting.precision if d.setting is not None else None
        spec = dataclasses.replace(
            result.spec,
            device=device.name,
            precision=precision or chosen or supported_precision(device),
        )
        found = plan_distributed(
            spec, result.effective_batch, device, margin, strategy, offload, gpus, nodes, shared
        )
        missing = (
            None
            if found is not None
            else NoMultiGpu(strategy=strategy, offload=offload, gpus=gpus, nodes=nodes)
        )
        d = dataclasses.replace(d, distributed=found, no_multi_gpu=missing)
        if d.verdict is Verdict.NO and found is not None:
            d = dataclasses.replace(
                d, sharded=_sharded(found, spec.optimizer), offloaded=_offloaded(found)
            )
        devices.append(d)
    return dataclasses.replace(result, devices=tuple(devices))


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
