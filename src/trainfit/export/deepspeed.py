"""A DeepSpeed config (`ds_config_<device>.json`) and an accelerate config that uses it
(`accelerate_ds_<device>.yaml`) for a multi-GPU plan, and a schema check of such a config.

Stages: zero1/2/3 as planned; fsdp2 and fsdp2-hybrid as stage 3 (hybrid as ZeRO++'s
`zero_hpz_partition_size` = GPUs per node); ddp as stage 0. Offload: `offload_optimizer`
(optimizer) and also `offload_param` (params), to the CPU with pinned memory. Buckets: the
DeepSpeed defaults the memory model counts (`distributed.memory`).

The schema check (`check_config`) knows the keys and value types of the sections written here
(DeepSpeed's config docs, deepspeed.ai/docs/config-json) and the batch arithmetic DeepSpeed
enforces: train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x
world size.

Known limitations: DeepSpeed is not installed on the GPU machine trainfit is checked on; its
memory is modelled only, and the check here is trainfit's own (benchmarks/deepspeed_schema.py
runs DeepSpeed's parser where DeepSpeed is installed).
"""

from __future__ import annotations

from trainfit.distributed.memory import (
    DS_ALLGATHER_BUCKET,
    DS_MAX_LIVE,
    DS_PREFETCH_BUCKET,
    DS_REDUCE_BUCKET,
)
from trainfit.distributed.search import DistributedPlan
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.errors import SpecError
from trainfit.hardware.units import GIB
from trainfit.models.live_names import model_label
from trainfit.spec import Precision, TrainSpec

PERSISTENCE_THRESHOLD = 100_000
"""`stage3_param_persistence_threshold` default (elements): smaller parameters stay gathered."""

_STAGE = {
    Strategy.DDP: 0,
    Strategy.ZERO1: 1,
    Strategy.ZERO2: 2,
    Strategy.ZERO3: 3,
    Strategy.FSDP2: 3,
    Strategy.FSDP2_HYBRID: 3,
}


def ds_config(spec: TrainSpec, plan: DistributedPlan) -> dict:
    """The DeepSpeed config of `plan`."""
    stage = _STAGE[plan.strategy]
    zero: dict[str, object] = {
        "stage": stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": DS_REDUCE_BUCKET,
    }
    if stage in (1, 2):
        zero["allgather_bucket_size"] = DS_ALLGATHER_BUCKET
    if stage == 3:
        zero["stage3_prefetch_bucket_size"] = DS_PREFETCH_BUCKET
        zero["stage3_max_live_parameters"] = DS_MAX_LIVE
        zero["stage3_param_persistence_threshold"] = PERSISTENCE_THRESHOLD
        zero["stage3_gather_16bit_weights_on_model_save"] = True
        if plan.strategy is Strategy.FSDP2_HYBRID:
            zero["zero_hpz_partition_size"] = plan.gpus // plan.nodes
    if plan.offload is not Offload.NONE and stage > 0:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if plan.offload is Offload.PARAMS and stage == 3:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, object] = {
        "train_batch_size": plan.micro_batch * plan.grad_accum * plan.gpus,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "gradient_clipping": spec.grad_clip if spec.grad_clip is not None else 1.0,
        "bf16": {"enabled": spec.precision in (Precision.BF16, Precision.PURE_BF16)},
        "fp16": {"enabled": spec.precision is Precision.FP16},
        "zero_optimization": zero,
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
    }
    return config


_TOP: dict[str, type | tuple[type, ...]] = {
    "train_batch_size": int,
    "train_micro_batch_size_per_gpu": int,
    "gradient_accumulation_steps": int,
    "gradient_clipping": (int, float),
    "bf16": dict,
    "fp16": dict,
    "zero_optimization": dict,
    "steps_per_print": int,
    "wall_clock_breakdown": bool,
    "optimizer": dict,
    "scheduler": dict,
    "activation_checkpointing": dict,
}
_ZERO: dict[str, type | tuple[type, ...]] = {
    "stage": int,
    "overlap_comm": bool,
    "contiguous_gradients": bool,
    "reduce_bucket_size": (int, float),
    "allgather_bucket_size": (int, float),
    "allgather_partitions": bool,
    "reduce_scatter": bool,
    "stage3_prefetch_bucket_size": (int, float),
    "stage3_max_live_parameters": (int, float),
    "stage3_max_reuse_distance": (int, float),
    "stage3_param_persistence_threshold": (int, float),
    "stage3_gather_16bit_weights_on_model_save": bool,
    "zero_hpz_partition_size": int,
    "sub_group_size": (int, float),
    "offload_optimizer": dict,
    "offload_param": dict,
}
_OFFLOAD: dict[str, type | tuple[type, ...]] = {
    "device": str,
    "pin_memory": bool,
    "nvme_path": str,
    "buffer_count": int,
    "buffer_size": (int, float),
    "max_in_cpu": (int, float),
    "ratio": (int, float),
}


def _typed(section: str, table: dict, values: dict, problems: list[str]) -> None:
    for key, value in values.items():
        if key not in table:
            problems.append(f"{section}{key}: not a key DeepSpeed takes here")
        elif isinstance(value, bool) and table[key] is not bool and table[key] is not dict:
            problems.append(f"{section}{key}: {value!r} is a bool, not a number")
        elif not isinstance(value, table[key]):
            want = table[key]
            names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
            problems.append(f"{section}{key}: {value!r} is not a {names}")


def check_config(config: dict, world_size: int) -> None:
    """SpecError listing every problem of a DeepSpeed config for `world_size` GPUs."""
    problems: list[str] = []
    _typed("", _TOP, config, problems)
    zero = config.get("zero_optimization", {})
    if isinstance(zero, dict):
        _typed("zero_optimization.", _ZERO, zero, problems)
        stage = zero.get("stage", 0)
        if stage not in (0, 1, 2, 3):
            problems.append(f"zero_optimization.stage: {stage!r} is not 0, 1, 2 or 3")
        for name in ("offload_optimizer", "offload_param"):
            offload = zero.get(name)
            if isinstance(offload, dict):
                _typed(f"zero_optimization.{name}.", _OFFLOAD, offload, problems)
                if offload.get("device") not in ("cpu", "nvme", "none"):
                    problems.append(
                        f"zero_optimization.{name}.device: {offload.get('device')!r} is not "
                        "cpu, nvme or none"
                    )
        if "offload_param" in zero and stage != 3:
            problems.append(f"zero_optimization.offload_param needs stage 3, not {stage}")
        if "offload_optimizer" in zero and stage == 0:
            problems.append("zero_optimization.offload_optimizer needs stage 1, 2 or 3")
    for name in ("bf16", "fp16"):
        section = config.get(name)
        if isinstance(section, dict) and not isinstance(section.get("enabled", False), bool):
            problems.append(f"{name}.enabled: {section.get('enabled')!r} is not a bool")
    if all(isinstance(config.get(k), dict) and config[k].get("enabled") for k in ("bf16", "fp16")):
        problems.append("bf16 and fp16 are both enabled: enable one")
    keys = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    total, micro, accum = (config.get(k) for k in keys)
    integers = all(isinstance(v, int) and not isinstance(v, bool) for v in (total, micro, accum))
    if integers and total != micro * accum * world_size:
        problems.append(
            f"train_batch_size {total} != train_micro_batch_size_per_gpu {micro} x "
            f"gradient_accumulation_steps {accum} x world size {world_size} "
            f"(= {micro * accum * world_size})"
        )
    if problems:
        raise SpecError(problems)


def accelerate_ds_config(plan: DistributedPlan, device: str) -> dict:
    """An accelerate config file that runs the DeepSpeed config (`accelerate launch`)."""
    config: dict[str, object] = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "deepspeed_config": {
            "deepspeed_config_file": f"ds_config_{device}.json",
            "zero3_init_flag": _STAGE[plan.strategy] == 3,
        },
        "distributed_type": "DEEPSPEED",
        "downcast_bf16": "no",
        "machine_rank": 0,
        "main_training_function": "main",
        "num_machines": plan.nodes,
        "num_processes": plan.gpus,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    # NB: no mixed_precision key: accelerate takes the precision from the DeepSpeed file
    if plan.nodes > 1:
        config["main_process_ip"] = "MAIN_PROCESS_IP"
        config["main_process_port"] = 29500
    return config


def deepspeed_files(spec: TrainSpec, plan: DistributedPlan, device: str) -> list[tuple[str, str]]:
    """(file name, text) of the deepspeed export; the config is schema-checked first."""
    import json

    from trainfit.export.configs import to_yaml

    config = ds_config(spec, plan)
    check_config(config, plan.gpus)
    header = [
        f"trainfit plan for {model_label(spec.model)} on {device}: DeepSpeed ZeRO stage "
        f"{config['zero_optimization']['stage']} over {plan.gpus} GPU(s) on {plan.nodes} "
        f"node(s); the plan's {plan.strategy.value} needs {plan.memory.total_bytes / GIB:.1f} "
        "GiB per GPU (modelled; DeepSpeed's own memory is modelled only, DeepSpeed not run)",
        f"accelerate launch --config_file accelerate_ds_{device}.yaml train.py"
        + (" (on every node, with machine_rank and main_process_ip set)" if plan.nodes > 1 else ""),
    ]
    return [
        (f"ds_config_{device}.json", json.dumps(config, indent=2) + "\n"),
        (f"accelerate_ds_{device}.yaml", to_yaml(accelerate_ds_config(plan, device), header)),
    ]
