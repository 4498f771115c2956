"""`trainfit.export.lightning`: a Lightning `Trainer` built for real from the export."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch

from tests.export.support import EIGHT_BIT, PURE, SHARDED, TWO_MACHINES, _hand_plan, _of
from trainfit.export.layout import LightningWrap, Machines, trainer_layout
from trainfit.export.layout_words import device_note_text
from trainfit.export.lightning import lightning_arguments
from trainfit.export.write import write_exports
from trainfit.plan.options import Plan


def _trainer_classes():
    from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator
    from lightning.pytorch.strategies import DDPStrategy, FSDPStrategy, SingleDeviceStrategy

    return CPUAccelerator, CUDAAccelerator, DDPStrategy, FSDPStrategy, SingleDeviceStrategy


def test_lightning_single_gpu_bf16_and_fp16(small: Plan, lightning_trainer) -> None:
    _, cuda, _, _, single = _trainer_classes()
    for name, precision in (("h100", "bf16-mixed"), ("t4", "16-mixed")):
        exported = lightning_arguments(trainer_layout(small, _of(small, name)))
        trainer = lightning_trainer(exported["trainer"])
        assert trainer.precision == precision
        assert isinstance(trainer.accelerator, cuda) and isinstance(trainer.strategy, single)
        assert trainer.num_devices == 1 and trainer.accumulate_grad_batches == 1
        assert trainer.gradient_clip_val == 1.0
    h100 = lightning_arguments(trainer_layout(small, _of(small, "h100")))
    assert h100["module"]["float32_matmul_precision"] == "high"
    assert (
        "float32_matmul_precision"
        not in lightning_arguments(trainer_layout(small, _of(small, "t4")))["module"]
    )


def test_lightning_cpu_and_the_rest_of_the_file(small: Plan, lightning_trainer) -> None:
    cpu_accelerator, *_ = _trainer_classes()
    exported = lightning_arguments(trainer_layout(small, _of(small, "cpu")))
    trainer = lightning_trainer(exported["trainer"])
    assert isinstance(trainer.accelerator, cpu_accelerator) and trainer.precision == "32-true"
    # NB: the DataLoader and the optimizer the module builds, from the other sections
    loader = torch.utils.data.DataLoader(range(256), **exported["dataloader"])
    assert loader.batch_size == 64 and loader.pin_memory is False and loader.num_workers == 4
    module = exported["module"]
    path, _, cls = str(module["optimizer"]).rpartition(".")
    optimizer = getattr(importlib.import_module(path), cls)(
        torch.nn.Linear(2, 2).parameters(), **module["optimizer_kwargs"]
    )
    assert isinstance(optimizer, torch.optim.AdamW)


@pytest.mark.slow
def test_lightning_accumulation_checkpointing_and_8bit(
    accumulating: Plan, lightning_trainer
) -> None:
    device = accumulating.devices[0]
    assert device.setting is not None
    trainer = lightning_trainer(
        lightning_arguments(trainer_layout(accumulating, device))["trainer"]
    )
    assert trainer.accumulate_grad_batches == device.setting.grad_accum
    assert trainer.gradient_clip_val is None  # NB: the spec does not clip
    exported = lightning_arguments(trainer_layout(_hand_plan(EIGHT_BIT), EIGHT_BIT))
    assert exported["module"] == {
        "gradient_checkpointing": True,
        "optimizer": "bitsandbytes.optim.AdamW8bit",
        "optimizer_kwargs": {},
        "float32_matmul_precision": "high",
    }
    assert lightning_trainer(exported["trainer"]).accumulate_grad_batches == 8


def test_lightning_data_parallel_and_sharded(small: Plan, lightning_trainer) -> None:
    _, _, ddp, fsdp, _ = _trainer_classes()
    lay = trainer_layout(small, _of(small, "h100"), gpus=4)
    assert (lay.micro_batch, lay.grad_accum, lay.effective_batch) == (16, 1, 64)
    trainer = lightning_trainer(lightning_arguments(lay)["trainer"])
    assert isinstance(trainer.strategy, ddp) and trainer.num_devices == 4
    assert trainer.device_ids == [0, 1, 2, 3]

    trainer = lightning_trainer(
        lightning_arguments(trainer_layout(_hand_plan(SHARDED), SHARDED))["trainer"]
    )
    assert isinstance(trainer.strategy, fsdp) and trainer.num_devices == 4
    assert trainer.precision == "bf16-mixed" and trainer.accumulate_grad_batches == 8

    lay = trainer_layout(_hand_plan(TWO_MACHINES), TWO_MACHINES)
    trainer = lightning_trainer(lightning_arguments(lay)["trainer"])
    assert isinstance(trainer.strategy, fsdp)
    assert (trainer.num_devices, trainer.num_nodes) == (8, 2)
    assert Machines(machines=2, instance=TWO_MACHINES.sharded.instance) in lay.notes


def test_lightning_pure_bf16(lightning_trainer) -> None:
    trainer = lightning_trainer(
        lightning_arguments(trainer_layout(_hand_plan(PURE), PURE))["trainer"]
    )
    assert trainer.precision == "bf16-true"


def test_lightning_fsdp_says_the_plan_assumes_each_layer_wrapped(tmp_path: Path) -> None:
    exported = lightning_arguments(trainer_layout(_hand_plan(SHARDED), SHARDED))
    assert exported["trainer"]["strategy"] == "fsdp"  # type: ignore[index]
    (note,) = exported["notes"]  # type: ignore[misc]
    assert "wraps the root module only" in note
    assert "FSDPStrategy(auto_wrap_policy={Block}" in note
    assert "ModelParallelStrategy" in note
    assert "notes" not in lightning_arguments(trainer_layout(_hand_plan(EIGHT_BIT), EIGHT_BIT))
    written = write_exports(_hand_plan(SHARDED), ["lightning", "hf"], tmp_path)
    assert f"h100: {note}" in [device_note_text(n) for n in written.notes]
    assert not any(
        isinstance(n.note, LightningWrap)
        for n in write_exports(_hand_plan(SHARDED), ["hf"], tmp_path).notes
    )
