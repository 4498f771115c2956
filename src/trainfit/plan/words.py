"""A plan in words and as JSON: the one place the plan's typed facts (`trainfit.plan.options`)
become sentences, for the report, the JSON, the exports and autofit's errors (all of which
are above the plan in the layers).
"""

from __future__ import annotations

import dataclasses

from trainfit.distributed.comm import OVERLAP, Collectives, CommTime
from trainfit.distributed.memory import RankMemory
from trainfit.distributed.search import DistributedPlan, OffloadTime
from trainfit.distributed.strategy import Offload
from trainfit.hardware.units import GIB
from trainfit.io import json_ready
from trainfit.models.live_names import model_label
from trainfit.plan.cost_words import cost_line_dict, recommendation_dict
from trainfit.plan.options import (
    Accumulation,
    Change,
    CpuFp32,
    CpuShort,
    CpuSized,
    DevicePlan,
    GpuShort,
    MemoryUnknown,
    MpsAutocast,
    NoMultiGpu,
    Plan,
    RamUnknown,
    RoundedBatch,
    Rung,
    SettingChange,
)
from trainfit.plan.time_words import no_time_text, step_time_dict
from trainfit.timing.missing import NoStepTime
from trainfit.timing.run import RunTime


def _samples(count: int) -> str:
    """A count of samples in words ("1 sample", "4 samples")."""
    return f"{count} sample{'s' if count > 1 else ''}"


def change_text(change: SettingChange) -> str:
    """One change from the requested settings in words."""
    if isinstance(change, MpsAutocast):
        return (
            f"{change.precision.value} autocast (torch 2.5 or later; its GradScaler needs "
            "torch 2.8)"
        )
    if isinstance(change, CpuFp32):
        return "fp32 (no mixed precision planned on the CPU)"
    if isinstance(change, Accumulation):
        return f"micro-batch {change.micro_batch} x {change.grad_accum} accumulation steps"
    if isinstance(change, RoundedBatch):
        return f"effective batch {change.effective} (not {change.asked})"
    return {
        Change.CHECKPOINTING: "gradient checkpointing",
        Change.EIGHT_BIT_ADAMW: "8-bit AdamW state",
    }[change]


def changes_text(d: DevicePlan) -> tuple[str, ...]:
    """The device's changes from the requested settings, each in words."""
    return tuple(change_text(c) for c in d.changes)


def note_text(d: DevicePlan) -> str:
    """The device's note in words ("" when it has none)."""
    note = d.note
    if note is None:
        return ""
    if isinstance(note, MemoryUnknown):
        return "its memory size is not in the catalog: give it in a user catalog file"
    if isinstance(note, RamUnknown):
        return "this host's RAM could not be detected: give it in a user catalog's cpu row"
    if isinstance(note, CpuSized):
        return (
            f"sized by {_whose(note.from_catalog)} RAM, {note.ram_bytes / GIB:.1f} GiB; the "
            "search stops at the effective batch"
        )
    if isinstance(note, CpuShort):
        return (
            f"one sample needs {note.one_sample_bytes / GIB:.1f} GiB of RAM with checkpointing, "
            f"over the {note.usable_bytes / GIB:.1f} GiB usable of {_whose(note.from_catalog)} "
            f"{note.ram_bytes / GIB:.1f} GiB"
        )
    return _gpu_short(note, d)


def _whose(from_catalog: bool) -> str:
    return "the catalog's" if from_catalog else "this host's"


def _gpu_short(note: GpuShort, d: DevicePlan) -> str:
    if note.one_sample_bytes is not None:
        what = (
            f"one sample needs {note.one_sample_bytes / GIB:.2f} GiB with every change on the "
            "ladder"
        )
    else:
        what = (
            "weights, gradients and optimizer state alone need at least "
            f"{note.states_bytes / GIB:.2f} GiB with every change on the ladder"
        )
    if not note.cuda:
        beyond = "; it needs a GPU with more memory, or LoRA (not planned yet)"
    elif d.distributed is None:
        beyond = f"; {multi_gpu_text(d.no_multi_gpu)}"
    else:
        beyond = _several(d.distributed, note)
    if d.offloaded is not None:
        off = d.offloaded
        beyond += (
            f"; with the model states in CPU memory (FSDP2 CPU offload) one of these GPUs would "
            f"need {off.gpu_bytes / GIB:.2f} GiB at {_samples(off.micro_batch)} and the host "
            f"{off.host_bytes / GIB:.1f} GiB of RAM (modelled)"
        )
    return (
        f"{what}, over the {note.usable_bytes / GIB:.2f} GiB usable"
        + beyond
        + "".join(f"; no gradient checkpointing ({why})" for why in note.no_checkpointing)
    )


def _several(found: DistributedPlan, note: GpuShort) -> str:
    """The multi-GPU plan that holds a job one GPU cannot, in words."""
    how = found.strategy.value + (
        f" with {found.offload.value} offloaded to CPU memory"
        if found.offload is not Offload.NONE
        else ""
    )
    if found.instance:
        where = f"; the cheapest catalog instance with them: {found.instances} x {found.instance}"
        where += f" (${found.usd_per_hour:.2f}/h on demand)" if found.usd_per_hour else ""
    else:
        where = f"; no catalog instance has {found.gpus} of this GPU"
    return (
        f"; it would fit {found.gpus} of these GPUs with {how} ({found.precision.value}"
        + (", gradient checkpointing" if found.checkpointing else "")
        + f", {note.optimizer.value}), {found.memory.total_bytes / GIB:.2f} GiB each at "
        f"{_samples(found.micro_batch)} per GPU ({rank_memory_label(found.memory)}; the "
        f"multi-GPU plan){where}"
    )


def time_text(d: DevicePlan) -> str:
    """Why the device has no step time, in words ("" when it has one)."""
    return "" if d.no_time is None else no_time_text(d.no_time)


def input_text(time: RunTime, data_rate: float | None) -> str:
    """What the run's hours say of its data loader."""
    if not data_rate:
        return (
            "data loading not counted: the hours assume the data loader keeps up (give "
            "--data-rate, or measure it with `trainfit measure-data`)"
        )
    per_step = f"{time.input_seconds * 1000:,.1f} ms of loading per step at {data_rate:g} samples/s"
    if time.input_bound:
        return (
            f"input-bound: {per_step}, {time.input_bound:.1f}x the step's compute; the hours "
            "are the loader's"
        )
    return f"data loading hides under compute ({per_step})"


def failing_text(d: DevicePlan) -> str:
    """Why a stage of a schedule has no setting on a device: its verdict, and what several of
    these GPUs would hold, or its note."""
    why = d.verdict.value
    if d.sharded is not None:
        sh = d.sharded
        why += (
            f": {sh.gpus} of these GPUs would hold it sharded ({sh.per_gpu_bytes / GIB:.2f} GiB "
            "each, modelled); --export writes that sharded setting for this stage"
        )
    elif d.note is not None:
        why += f": {note_text(d)}"
    return why


def multi_gpu_text(missing: NoMultiGpu | None) -> str:
    """Why no multi-GPU plan holds the job, in words ("" when one does or none was sought)."""
    if missing is None:
        return ""
    what = []
    if missing.strategy is not None:
        what.append(missing.strategy.value)
    if missing.offload is not None:
        what.append(f"offload {missing.offload.value}")
    if missing.gpus is not None or missing.nodes is not None:
        what.append(f"{missing.gpus or 'auto'} GPUs over {missing.nodes or 'auto'} nodes")
    fixed = f" ({', '.join(what)})" if what else ""
    return (
        f"no multi-GPU plan{fixed} holds one sample per GPU up to the GPU counts tried "
        "(modelled): sequence or tensor parallelism, a larger GPU or LoRA would be needed"
    )


def rung_text(rung: Rung) -> str:
    """One change of the low-memory ladder in words."""
    if rung.change is None:
        return f"fp32, {rung.micro_batch} samples per step"
    return {
        Change.MIXED_PRECISION: f"{rung.precision.value} mixed precision",
        Change.QUARTER_MICRO_BATCH: f"{rung.micro_batch} samples per step with accumulation",
        Change.CHECKPOINTING: "gradient checkpointing",
        Change.EIGHT_BIT_ADAMW: "8-bit AdamW state",
        Change.MICRO_BATCH_ONE: "1 sample per step with accumulation",
    }[rung.change]


def _asdict(value: object) -> object:
    """A dataclass instance as JSON-ready values (None stays None)."""
    if value is None:
        return None
    assert dataclasses.is_dataclass(value) and not isinstance(value, type)
    return json_ready(dataclasses.asdict(value))


def plan_dict(plan: Plan) -> dict[str, object]:
    """The plan as JSON (bytes as integers, enums as their values, notes in words; a live
    model by its class, `models.live.model_label`)."""
    return {
        "model": model_label(plan.spec.model),
        "lora": None if plan.spec.lora is None else plan.spec.lora.to_dict(),
        "effective_batch": plan.effective_batch,
        "margin": plan.margin,
        "devices": [device_dict(d) for d in plan.devices],
        "ladder_device": plan.ladder_device,
        "ladder": [
            {
                "change": rung_text(r),
                "micro_batch": r.micro_batch,
                "grad_accum": r.grad_accum,
                "needed_bytes": r.needed_bytes,
                "saved_bytes": r.saved_bytes,
            }
            for r in plan.ladder
        ],
        "run": _asdict(plan.run),
        "recommendation": (
            None if plan.recommendation is None else recommendation_dict(plan.recommendation)
        ),
    }


def device_dict(d: DevicePlan) -> dict[str, object]:
    """One device's plan as JSON: times and costs as the estimate's JSON gives them."""
    return {
        "device": d.device,
        "display": d.display,
        "verdict": d.verdict.value,
        "setting": _asdict(d.setting),
        "changes": list(changes_text(d)),
        "max_micro_batch": d.max_micro_batch,
        "tiers": [_asdict(t) for t in d.tiers],
        "note": note_text(d),
        "sharded": _asdict(d.sharded),
        "offloaded": _asdict(d.offloaded),
        "time_note": time_text(d),
        "distributed_note": multi_gpu_text(d.no_multi_gpu),
        "distributed": None if d.distributed is None else distributed_dict(d.distributed),
        "time": None if d.step_time is None else step_time_dict(d.step_time),
        "time_by_gpus": {str(n): step_time_dict(t) for n, t in d.step_times},
        "run": _asdict(d.run),
        "costs": [cost_line_dict(c) for c in d.costs],
    }


def distributed_dict(p: DistributedPlan) -> dict[str, object]:
    """A multi-GPU plan as JSON (its note in words)."""
    return {
        "device": p.device,
        "strategy": p.strategy.value,
        "offload": p.offload.value,
        "gpus": p.gpus,
        "nodes": p.nodes,
        "gpus_per_node": p.gpus // p.nodes,
        "precision": p.precision.value,
        "checkpointing": p.checkpointing,
        "micro_batch": p.micro_batch,
        "grad_accum": p.grad_accum,
        "memory": rank_memory_dict(p.memory),
        "budget_bytes": p.budget_bytes,
        "comm": None if p.comm is None else comm_dict(p.comm),
        "step_seconds": None if p.step_seconds is None else round(p.step_seconds, 4),
        "instance": p.instance,
        "instances": p.instances,
        "usd_per_hour": p.usd_per_hour,
        "label": rank_memory_label(p.memory),
        "note": distributed_note_text(p.note),
        "fewer_with_offload": None
        if p.fewer_with_offload is None
        else distributed_dict(p.fewer_with_offload),
    }


_COLLECTIVES = {
    Collectives.NONE: "one GPU: no collectives",
    Collectives.ALL_REDUCE: (
        "gradient all-reduce once per optimizer step, none hidden (measured on 2 x H200 for DDP)"
    ),
    Collectives.GATHERED: (
        f"all-gathers and reduce-scatters every micro-batch; up to {OVERLAP:.0%} of forward + "
        "backward compute hides them (assumed, not measured)"
    ),
}


def comm_dict(comm: CommTime) -> dict[str, object]:
    """A multi-GPU step's collectives as JSON, the overlap assumed in words."""
    return {
        "seconds": round(comm.seconds, 6),
        "exposed_seconds": round(comm.exposed_seconds, 6),
        "bytes_per_gpu": comm.bytes_per_gpu,
        "intra_node_gbs": comm.intra_gbs,
        "inter_node_gbs": comm.inter_gbs,
        "label": "modelled",
        "assumption": _COLLECTIVES[comm.collectives],
    }


def rank_memory_label(memory: RankMemory) -> str:
    """How a rank's memory was obtained: modelled (DeepSpeed's without running DeepSpeed)."""
    return "modelled, DeepSpeed not run" if memory.strategy.deepspeed else "modelled"


def rank_memory_dict(memory: RankMemory) -> dict[str, object]:
    """What one GPU of a multi-GPU plan holds, as JSON."""
    return {
        "strategy": memory.strategy.value,
        "offload": memory.offload.value,
        "gpus": memory.gpus,
        "nodes": memory.nodes,
        "micro_batch": memory.micro_batch,
        "per_rank_bytes": memory.total_bytes,
        "peak_allocated_bytes": memory.peak_allocated_bytes,
        "breakdown": {
            "parameters": memory.parameters_bytes,
            "gradients": memory.gradients_bytes,
            "optimizer_state": memory.optimizer_state_bytes,
            "activations": memory.activations_bytes,
            "other": memory.other_bytes,
            "engine": memory.engine_bytes,
            "nccl": memory.nccl_bytes,
            "context": memory.context_bytes,
        },
        "host_bytes_per_node": memory.host_bytes_per_node,
        "label": rank_memory_label(memory),
    }


def distributed_note_text(note: OffloadTime | NoStepTime | None) -> str:
    """What offloading adds to a multi-GPU step, or why it has no time ("" for neither)."""
    if note is None:
        return ""
    if isinstance(note, NoStepTime):
        return no_time_text(note)
    return (
        f"offload: {note.copies} x {note.seconds:.2f} s over PCIe added, none hidden; the "
        "host's optimizer step is not timed"
    )
