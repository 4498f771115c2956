"""A plan's `TrainerLayout` as an `accelerate launch --config_file` file (YAML, the shape
`accelerate config` writes), with what the Accelerator and the training loop take in its header.

The accelerate export needs accelerate installed.
"""

from __future__ import annotations

from trainfit.export.configs import to_yaml
from trainfit.export.hf import fsdp_fields
from trainfit.export.layout import TrainerLayout
from trainfit.export.layout_words import layout_notes_text
from trainfit.hardware.catalog import DeviceKind
from trainfit.models.live_names import model_label
from trainfit.optim import optimizer_entry
from trainfit.plan.options import Plan
from trainfit.spec import Precision

_ACCELERATE_PRECISION = {
    Precision.FP32: "no",
    Precision.TF32: "no",
    Precision.FP16: "fp16",
    Precision.BF16: "bf16",
    Precision.PURE_BF16: "no",
}


def accelerate_config(lay: TrainerLayout) -> dict[str, object]:
    """The fields of an accelerate config file (`ClusterConfig`), in `accelerate config`'s
    shape."""
    if lay.sharded:
        distributed = "FSDP"
    elif lay.gpus > 1:
        distributed = "MULTI_GPU"
    else:
        distributed = "NO"
    config: dict[str, object] = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "distributed_type": distributed,
        "downcast_bf16": "no",
        "enable_cpu_affinity": False,
    }
    if lay.kind is DeviceKind.CUDA:
        config["gpu_ids"] = "all"
    config.update(
        {
            "machine_rank": 0,
            "main_training_function": "main",
            "mixed_precision": _ACCELERATE_PRECISION[lay.precision],
            "num_machines": lay.machines,
            "num_processes": lay.gpus,
            "rdzv_backend": "static",
            "same_network": True,
            "use_cpu": lay.kind is DeviceKind.CPU,
        }
    )
    if lay.sharded:
        config["fsdp_config"] = {f"fsdp_{k}": v for k, v in fsdp_fields(lay).items()}
    return config


def accelerate_text(plan: Plan, lay: TrainerLayout, display: str = "") -> str:
    """The accelerate config file, with what the Accelerator and the loop take in its header
    (accelerate's config has no batch, accumulation or optimizer fields)."""
    header = [
        f"trainfit plan for {model_label(plan.spec.model)} on {display or lay.device}: "
        f"accelerate launch --config_file accelerate_{lay.device}.yaml train.py",
        f"in train.py: Accelerator(gradient_accumulation_steps={lay.grad_accum}), DataLoader "
        f"batch_size={lay.micro_batch}, optimizer {optimizer_entry(lay.optimizer).class_path}"
        + (", gradient checkpointing" if lay.checkpointing and not lay.sharded else "")
        + (f", clip_grad_norm_ at {lay.grad_clip:g}" if lay.grad_clip is not None else ""),
        *layout_notes_text(lay.notes),
    ]
    return to_yaml(accelerate_config(lay), header)


__all__ = ["accelerate_config", "accelerate_text"]
