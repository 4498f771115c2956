"""The launch files of a multi-GPU plan: a torchrun command (`launch_<device>.sh`), the FSDP2
settings it reads (`fsdp2_<device>.json`) and the training script template
(`train_fsdp2.py`, this package's `train_fsdp2` module as text).

The settings: the world size and mesh (1-D over all GPUs; for fsdp2-hybrid a 2-D
(replicate = nodes, shard = GPUs per node) mesh, HSDP), `reshard_after_forward` (True: the
gathered units are freed after forward, as the memory model assumes), the
MixedPrecisionPolicy dtypes (compute dtype; fp32 `reduce_dtype`), CPUOffloadPolicy, activation
checkpointing, the micro-batch and accumulation, preference training (DPO and its reference
copy's dtype), and the plan's per-rank figures.

Known limitations: multi-node commands leave MASTER_ADDR (node 0's address) and the
rendezvous id to the user (placeholders with `${...:?}` checks); the template's learning rate
is a placeholder (trainfit does not plan it).
"""

from __future__ import annotations

import json
from importlib import resources

from trainfit.distributed.search import DistributedPlan
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.errors import TrainfitError
from trainfit.hardware.units import GIB
from trainfit.plan.words import rank_memory_label
from trainfit.spec import Precision, TrainSpec

TEMPLATE = "train_fsdp2.py"
LEARNING_RATE = 1e-5
"""Written into the settings as a placeholder (the plan does not choose a learning rate)."""
RDZV_PORT = 29500


def fsdp2_settings(spec: TrainSpec, plan: DistributedPlan, effective_batch: int) -> dict:
    """The JSON `train_fsdp2.py` reads (DDP plans too: `strategy` says which engine)."""
    if plan.strategy.deepspeed:
        raise TrainfitError(
            f"{plan.device}: the plan's strategy is {plan.strategy.value} (DeepSpeed): export "
            "it with --export deepspeed, or plan with --strategy fsdp2"
        )
    from trainfit.models.catalog import find

    row = find(spec.model)
    per_node = plan.gpus // plan.nodes
    hybrid = plan.strategy is Strategy.FSDP2_HYBRID
    precision = spec.precision
    compute = precision.autocast_dtype or precision.param_dtype
    names = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}
    compute_name = names[str(compute).removeprefix("torch.")]
    return {
        "model": spec.model,
        "hub_id": row.hub_id if row is not None and row.hub_id else spec.model,
        "seq_len": spec.seq_len,
        "strategy": plan.strategy.value,
        "world_size": plan.gpus,
        "nodes": plan.nodes,
        "gpus_per_node": per_node,
        "mesh_shape": [plan.nodes, per_node] if hybrid else [plan.gpus],
        "mesh_dim_names": ["replicate", "shard"] if hybrid else ["shard"],
        "reshard_after_forward": True,
        "mixed_precision": {
            "param_dtype": compute_name,
            "reduce_dtype": "float32",
        },
        "cpu_offload": plan.offload is Offload.PARAMS,
        "activation_checkpointing": plan.checkpointing,
        "micro_batch": plan.micro_batch,
        "grad_accum": plan.grad_accum,
        "effective_batch": plan.micro_batch * plan.grad_accum * plan.gpus,
        "requested_effective_batch": effective_batch,
        "preference": None if spec.preference is None else spec.preference.value,
        "reference": spec.reference.value,
        "reference_dtype": None if spec.reference_dtype is None else spec.reference_dtype.value,
        "optimizer": spec.optimizer.value,
        "learning_rate": LEARNING_RATE,
        "grad_clip": spec.grad_clip,
        "fp16_note": "fp16 needs a ShardedGradScaler (not in the template)"
        if precision is Precision.FP16
        else "",
        "predicted_per_rank_bytes": plan.memory.total_bytes,
        "predicted_peak_allocated_bytes": plan.memory.peak_allocated_bytes,
        "predicted_label": rank_memory_label(plan.memory),
    }


def launch_script(spec: TrainSpec, plan: DistributedPlan, device: str) -> str:
    """`launch_<device>.sh`: the torchrun command of the plan."""
    per_node = plan.gpus // plan.nodes
    config = f"fsdp2_{device}.json"
    head = [
        "#!/usr/bin/env bash",
        f"# trainfit plan for {spec.model} on {device}: {plan.strategy.value}"
        + (f" + offload {plan.offload.value}" if plan.offload is not Offload.NONE else "")
        + f" over {plan.gpus} GPU(s) on {plan.nodes} node(s), micro-batch {plan.micro_batch}"
        f" x {plan.grad_accum} accumulation, {plan.memory.total_bytes / GIB:.1f} GiB per "
        f"GPU ({rank_memory_label(plan.memory)})",
        "set -euo pipefail",
    ]
    if plan.nodes == 1:
        command = (
            f"torchrun --standalone --nnodes=1 --nproc-per-node={per_node} "
            f'{TEMPLATE} --config {config} "$@"'
        )
    else:
        head.append(
            "# run on every node; MASTER_ADDR is node 0's address, RDZV_ID any id shared by "
            "the nodes of one job"
        )
        command = (
            f"torchrun --nnodes={plan.nodes} --nproc-per-node={per_node} "
            "--rdzv-backend=c10d "
            f'--rdzv-endpoint="${{MASTER_ADDR:?set MASTER_ADDR}}:${{MASTER_PORT:-{RDZV_PORT}}}" '
            '--rdzv-id="${RDZV_ID:?set RDZV_ID}" '
            f'{TEMPLATE} --config {config} "$@"'
        )
    return "\n".join([*head, command, ""])


def template_text() -> str:
    """The training script template (package data: `templates/train_fsdp2.py`)."""
    return resources.files("trainfit.export").joinpath("templates", TEMPLATE).read_text()


def torchrun_files(
    spec: TrainSpec, plan: DistributedPlan, device: str, effective_batch: int
) -> list[tuple[str, str]]:
    """(file name, text) of the torchrun export."""
    settings = fsdp2_settings(spec, plan, effective_batch)
    return [
        (f"launch_{device}.sh", launch_script(spec, plan, device)),
        (f"fsdp2_{device}.json", json.dumps(settings, indent=2) + "\n"),
        (TEMPLATE, template_text()),
    ]
