"""`trainfit.export.accelerate`: the config read by accelerate's own loader and launcher."""

from __future__ import annotations

from pathlib import Path

from tests.export.support import SHARDED, TWO_MACHINES, _hand_plan, _of, _write_accelerate
from trainfit.export.accelerate import accelerate_config
from trainfit.export.layout import trainer_layout
from trainfit.export.write import export_text
from trainfit.plan.options import Plan


def test_accelerate_single_gpu(small: Plan, tmp_path: Path) -> None:
    config, env = _write_accelerate(tmp_path, small, _of(small, "h100"))
    assert config.distributed_type == "NO" and config.num_processes == 1
    assert config.mixed_precision == "bf16" and config.gpu_ids == "all"
    assert config.use_cpu is False
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    _, env = _write_accelerate(tmp_path, small, _of(small, "t4"))
    assert env["ACCELERATE_MIXED_PRECISION"] == "fp16"


def test_accelerate_cpu(small: Plan, tmp_path: Path) -> None:
    config, env = _write_accelerate(tmp_path, small, _of(small, "cpu"))
    assert config.use_cpu is True and config.mixed_precision == "no"
    assert env["ACCELERATE_USE_CPU"] == "True"


def test_accelerate_data_parallel(small: Plan, tmp_path: Path) -> None:
    config, env = _write_accelerate(tmp_path, small, _of(small, "h100"), gpus=4)
    assert config.distributed_type == "MULTI_GPU" and config.num_processes == 4
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"


def test_accelerate_sharded(tmp_path: Path) -> None:
    result = _hand_plan(SHARDED)
    config, env = _write_accelerate(tmp_path, result, SHARDED)
    assert config.distributed_type == "FSDP" and config.num_processes == 4
    assert config.fsdp_config["fsdp_version"] == 2
    assert config.fsdp_config["fsdp_activation_checkpointing"] is True
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    assert env["FSDP_ACTIVATION_CHECKPOINTING"] == "true"
    text = export_text(result, SHARDED, "accelerate")
    assert "Accelerator(gradient_accumulation_steps=8), DataLoader batch_size=1" in text

    two = accelerate_config(trainer_layout(_hand_plan(TWO_MACHINES), TWO_MACHINES))
    assert (two["num_machines"], two["num_processes"]) == (2, 16)
