"""A device's multi-GPU plan as launch files: torchrun + FSDP2 (`trainfit.export.torchrun`) or
DeepSpeed (`trainfit.export.deepspeed`); a device that fits alone launches on one GPU with
its setting (see docs/multi-gpu.md)."""

from __future__ import annotations

import dataclasses

from trainfit.distributed.memory import RankMemory
from trainfit.distributed.search import DistributedPlan
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.errors import TrainfitError
from trainfit.export.deepspeed import deepspeed_files
from trainfit.export.formats import ExportFormat
from trainfit.export.torchrun import torchrun_files
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.plan.options import DevicePlan, Plan, Setting
from trainfit.plan.words import multi_gpu_text


def launch_files(plan: Plan, device: DevicePlan, fmt: ExportFormat) -> list[tuple[str, str]]:
    """The torchrun or deepspeed files of `device`: from its multi-GPU plan, else (a device
    that fits alone) one GPU with its setting. TrainfitError when there is neither."""
    found = device.distributed
    if found is None:
        if device.setting is None or get_device(device.device).kind is not DeviceKind.CUDA:
            raise TrainfitError(
                multi_gpu_text(device.no_multi_gpu)
                or f"{device.verdict.value}, and no multi-GPU plan (CUDA GPUs only)"
            )
        found = _one_gpu(device.device, device.setting)
    spec = dataclasses.replace(
        plan.spec, precision=found.precision, checkpointing=found.checkpointing
    )
    if fmt is ExportFormat.TORCHRUN:
        return torchrun_files(spec, found, device.device, plan.effective_batch)
    return deepspeed_files(spec, found, device.device)


def _one_gpu(device: str, s: Setting) -> DistributedPlan:
    """A one-GPU DistributedPlan of a device whose setting fits (DDP over one GPU)."""
    memory = RankMemory(
        strategy=Strategy.DDP,
        offload=Offload.NONE,
        gpus=1,
        nodes=1,
        micro_batch=s.micro_batch,
        total_bytes=s.needed_bytes,
        peak_allocated_bytes=0,
        parameters_bytes=0,
        gradients_bytes=0,
        optimizer_state_bytes=0,
        activations_bytes=0,
        other_bytes=0,
        engine_bytes=0,
        nccl_bytes=0,
        context_bytes=0,
        host_bytes_per_node=0,
    )
    return DistributedPlan(
        device=device,
        strategy=Strategy.DDP,
        offload=Offload.NONE,
        gpus=1,
        nodes=1,
        checkpointing=s.checkpointing,
        micro_batch=s.micro_batch,
        grad_accum=s.grad_accum,
        memory=memory,
        budget_bytes=0,
        comm=None,
        step_seconds=None,
        instance="",
        instances=0,
        usd_per_hour=None,
        precision=s.precision,
    )


__all__ = ["launch_files"]
