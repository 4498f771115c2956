"""`trainfit.export.hf`: Hugging Face `TrainingArguments` built for real from the export."""

from __future__ import annotations

import importlib

import pytest
import torch

from tests.export.support import EIGHT_BIT, MOMENTUM, PURE, SHARDED, _hand_plan, _of
from trainfit.export.hf import hf_training_arguments
from trainfit.export.layout import Beside, trainer_layout
from trainfit.plan.options import Plan


def test_hf_bf16_on_an_ampere_gpu(small: Plan, training_arguments) -> None:
    args = training_arguments(hf_training_arguments(trainer_layout(small, _of(small, "h100"))))
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (64, 1)
    assert args.bf16 and not args.fp16 and args.mixed_precision == "bf16"
    assert args.tf32 is True
    assert args.optim == "adamw_torch_fused"
    assert args.max_grad_norm == 1.0
    assert args.dataloader_num_workers == 4 and args.dataloader_pin_memory
    assert not args.gradient_checkpointing and not args.use_cpu


def test_hf_fp16_before_ampere_has_no_tf32(small: Plan, training_arguments) -> None:
    kwargs = hf_training_arguments(trainer_layout(small, _of(small, "t4")))
    assert "tf32" not in kwargs  # NB: TrainingArguments raises for tf32 before Ampere
    args = training_arguments(kwargs)
    assert args.fp16 and not args.bf16 and args.mixed_precision == "fp16"
    assert args.tf32 is None
    assert args.optim == "adamw_torch_fused"


def test_hf_fp32_on_the_cpu(small: Plan, training_arguments) -> None:
    args = training_arguments(hf_training_arguments(trainer_layout(small, _of(small, "cpu"))))
    assert args.use_cpu and args.device.type == "cpu"
    assert not args.bf16 and not args.fp16 and args.mixed_precision == "no"
    assert args.optim == "adamw_torch"  # NB: the fused kernel is the CUDA choice
    assert args.dataloader_pin_memory is False


@pytest.mark.slow
def test_hf_accumulation_from_a_real_plan(accumulating: Plan, training_arguments) -> None:
    device = accumulating.devices[0]
    assert device.setting is not None and device.setting.grad_accum > 1
    args = training_arguments(hf_training_arguments(trainer_layout(accumulating, device)))
    assert args.per_device_train_batch_size == device.setting.micro_batch
    assert args.gradient_accumulation_steps == device.setting.grad_accum
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 64
    assert args.max_grad_norm == 1.0  # NB: no clip in the spec: HF's default stays


def test_hf_checkpointing_and_8bit(training_arguments) -> None:
    pytest.importorskip("transformers")
    from transformers import Trainer

    args = training_arguments(
        hf_training_arguments(trainer_layout(_hand_plan(EIGHT_BIT), EIGHT_BIT))
    )
    assert args.gradient_checkpointing
    assert args.gradient_checkpointing_kwargs == {"use_reentrant": False}
    assert args.optim == "adamw_bnb_8bit"
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 8)
    if importlib.util.find_spec("bitsandbytes") is None:
        with pytest.raises(ImportError, match="bitsandbytes"):
            Trainer.get_optimizer_cls_and_kwargs(args)


def test_hf_sgd_momentum_reaches_the_optimizer(training_arguments) -> None:
    pytest.importorskip("transformers")
    from transformers import Trainer

    args = training_arguments(hf_training_arguments(trainer_layout(_hand_plan(MOMENTUM), MOMENTUM)))
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
    assert cls is torch.optim.SGD and kwargs["momentum"] == 0.9


def test_hf_pure_bf16_has_no_autocast(training_arguments) -> None:
    lay = trainer_layout(_hand_plan(PURE), PURE)
    args = training_arguments(hf_training_arguments(lay))
    assert not args.bf16 and not args.fp16 and args.tf32 is None
    assert Beside.PURE_BF16 in lay.notes


def test_hf_sharded_is_fsdp2_with_the_engine_checkpointing(training_arguments) -> None:
    args = training_arguments(hf_training_arguments(trainer_layout(_hand_plan(SHARDED), SHARDED)))
    assert args.fsdp is True
    assert args.fsdp_plugin_args["fsdp_version"] == 2
    assert args.fsdp_plugin_args["activation_checkpointing"] is True
    assert args.fsdp_plugin_args["auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert not args.gradient_checkpointing
    # NB: 32 samples over 4 GPUs at 1 each
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (1, 8)
