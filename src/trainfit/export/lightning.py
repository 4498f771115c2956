"""A plan's `TrainerLayout` as PyTorch Lightning `Trainer` arguments, with the DataLoader's and
the LightningModule's (JSON).

The lightning export needs lightning (or pytorch_lightning) installed.

Known limitations: the file's `module` and `dataloader` sections are for the user's own
LightningModule and DataLoader (the Trainer has no such arguments); the file's
`strategy: "fsdp"` is Lightning 2.x's FSDPStrategy (FSDP1), which without an auto-wrap policy
wraps the root module only, not each layer as the plan's memory assumes: the file's `notes`
(and `write_exports`' notes) say to pass `FSDPStrategy(auto_wrap_policy={Block})` or use
`ModelParallelStrategy` (FSDP2).
"""

from __future__ import annotations

from trainfit.export.layout import DATALOADER_WORKERS, LightningWrap, TrainerLayout
from trainfit.hardware.catalog import DeviceKind
from trainfit.optim import optimizer_entry
from trainfit.spec import Precision

_LIGHTNING_PRECISION = {
    Precision.FP32: "32-true",
    Precision.TF32: "32-true",
    Precision.FP16: "16-mixed",
    Precision.BF16: "bf16-mixed",
    Precision.PURE_BF16: "bf16-true",
}
_LIGHTNING_ACCELERATOR = {DeviceKind.CUDA: "gpu", DeviceKind.CPU: "cpu", DeviceKind.MPS: "mps"}


def lightning_fsdp_note(note: LightningWrap) -> str:
    """What `strategy: "fsdp"` leaves to the user: Lightning 2.x's `FSDPStrategy` (FSDP1)
    without an auto-wrap policy wraps the root module only; the plan's memory is per-layer
    full sharding."""
    checkpointing = ", activation_checkpointing_policy={Block}" if note.checkpointing else ""
    return (
        'lightning strategy "fsdp" is FSDPStrategy with no auto-wrap policy, which wraps the root '
        "module only (each GPU gathers every parameter at once); the plan's memory assumes "
        "each layer wrapped (FSDP2-style full sharding): pass "
        f"Trainer(strategy=FSDPStrategy(auto_wrap_policy={{Block}}{checkpointing}), ...) "
        "with your model's repeated block class as Block, or ModelParallelStrategy() with "
        "fully_shard on each block and then the model in configure_model (FSDP2)"
    )


def lightning_arguments(lay: TrainerLayout) -> dict[str, object]:
    """`trainer`: keyword arguments of `lightning.pytorch.Trainer`; `dataloader`: of the
    training DataLoader; `module`: what the LightningModule sets itself (checkpointing, the
    optimizer and its keyword arguments, the float32 matmul precision); for a sharded run,
    `notes`: the wrapping the Trainer's `"fsdp"` strategy needs (`lightning_fsdp_note`)."""
    trainer: dict[str, object] = {
        "accelerator": _LIGHTNING_ACCELERATOR[lay.kind],
        "devices": lay.gpus // lay.machines,
        "strategy": "fsdp" if lay.sharded else ("ddp" if lay.gpus > 1 else "auto"),
        "precision": _LIGHTNING_PRECISION[lay.precision],
        "accumulate_grad_batches": lay.grad_accum,
    }
    if lay.machines > 1:
        trainer["num_nodes"] = lay.machines
    if lay.grad_clip is not None:
        trainer["gradient_clip_val"] = lay.grad_clip
    optimizer = optimizer_entry(lay.optimizer)
    optimizer_kwargs: dict[str, object] = {}
    if optimizer.fused and lay.kind is DeviceKind.CUDA:
        optimizer_kwargs["fused"] = True
    optimizer_kwargs.update(optimizer.settings)
    module: dict[str, object] = {
        "gradient_checkpointing": lay.checkpointing,
        "optimizer": optimizer.class_path,
        "optimizer_kwargs": optimizer_kwargs,
    }
    if lay.tf32:
        module["float32_matmul_precision"] = "high"
    dataloader: dict[str, object] = {
        "batch_size": lay.micro_batch,
        "num_workers": DATALOADER_WORKERS,
        "pin_memory": lay.kind is DeviceKind.CUDA,
        "persistent_workers": DATALOADER_WORKERS > 0,
    }
    out: dict[str, object] = {"trainer": trainer, "dataloader": dataloader, "module": module}
    if lay.sharded:
        out["notes"] = [lightning_fsdp_note(LightningWrap(checkpointing=lay.checkpointing))]
    return out


__all__ = ["lightning_arguments", "lightning_fsdp_note"]
