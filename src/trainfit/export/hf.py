"""A plan's `TrainerLayout` as Hugging Face `TrainingArguments` keyword arguments (JSON), and
the HF names of its optimizers and FSDP2 settings (accelerate's config takes the same).

The hf export needs transformers and accelerate installed (`TrainingArguments` needs
accelerate): `trainfit.export.formats.require_packages` names what to install.
"""

from __future__ import annotations

from trainfit.export.layout import DATALOADER_WORKERS, TrainerLayout
from trainfit.hardware.catalog import DeviceKind
from trainfit.optim import optimizer_entry
from trainfit.spec import Precision


def fsdp_fields(lay: TrainerLayout) -> dict[str, object]:
    """FSDP2 full sharding, the keys without accelerate's `fsdp_` prefix (HF takes either)."""
    return {
        "version": 2,
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "reshard_after_forward": True,
        "offload_params": False,
        "state_dict_type": "SHARDED_STATE_DICT",
        "cpu_ram_efficient_loading": True,
        "activation_checkpointing": lay.checkpointing,
    }


def hf_training_arguments(lay: TrainerLayout) -> dict[str, object]:
    """Keyword arguments of `transformers.TrainingArguments` (all but `output_dir`)."""
    kwargs: dict[str, object] = {
        "per_device_train_batch_size": lay.micro_batch,
        "gradient_accumulation_steps": lay.grad_accum,
        "bf16": lay.precision is Precision.BF16,
        "fp16": lay.precision is Precision.FP16,
    }
    if lay.tf32:
        kwargs["tf32"] = True
    # NB: under FSDP the engine checkpoints (fsdp_config), not the model
    checkpointing = lay.checkpointing and not lay.sharded
    kwargs["gradient_checkpointing"] = checkpointing
    if checkpointing:
        kwargs["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    optimizer = optimizer_entry(lay.optimizer)
    kwargs["optim"] = optimizer.hf_name(lay.kind)
    if (args := optimizer.hf_optim_args()) is not None:
        kwargs["optim_args"] = args
    if lay.grad_clip is not None:
        kwargs["max_grad_norm"] = lay.grad_clip
    kwargs["dataloader_num_workers"] = DATALOADER_WORKERS
    kwargs["dataloader_pin_memory"] = lay.kind is DeviceKind.CUDA
    kwargs["dataloader_persistent_workers"] = DATALOADER_WORKERS > 0
    if lay.kind is DeviceKind.CPU:
        kwargs["use_cpu"] = True
    if lay.sharded:
        kwargs["fsdp"] = True
        kwargs["fsdp_config"] = fsdp_fields(lay)
    return kwargs


__all__ = ["fsdp_fields", "hf_training_arguments"]
