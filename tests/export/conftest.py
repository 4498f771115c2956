"""The export tests' plans (a small MLP on three devices, GPT-2 accumulating on an 8 GB card)
and the real constructors they build from an export, with their hardware checks patched out
(CI has no GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.export.support import MLP
from trainfit import TrainSpec
from trainfit.plan.options import Plan
from trainfit.plan.search import plan


@pytest.fixture(scope="module")
def small() -> Plan:
    """bf16 on an H100, fp16 on a T4 (no bf16 before Ampere), fp32 on the CPU."""
    spec = TrainSpec(model=MLP, grad_clip=1.0)
    return plan(spec, effective_batch=64, devices=("h100", "t4", "cpu"), ladder=False)


@pytest.fixture(scope="module")
def accumulating() -> Plan:
    """GPT-2 at 1024 tokens on an 8 GB card: a micro-batch of 2 and 32 accumulation steps."""
    spec = TrainSpec(model="gpt2", seq_len=1024)
    return plan(spec, effective_batch=64, devices=("rtx-4060",), ladder=False)


@pytest.fixture
def training_arguments(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Build `TrainingArguments(output_dir=..., **kwargs)` as on an Ampere GPU: transformers
    5.17 checks bf16 (`is_torch_bf16_gpu_available`) and tf32 (`is_torch_tf32_available`,
    then `enable_tf32` sets torch's global flag) in `training_args`; nothing checks fp16."""
    pytest.importorskip("accelerate")
    ta = pytest.importorskip("transformers.training_args")
    monkeypatch.setattr(ta, "is_torch_bf16_gpu_available", lambda: True)
    monkeypatch.setattr(ta, "is_torch_tf32_available", lambda: True)
    monkeypatch.setattr(ta, "enable_tf32", lambda enable: None)
    # NB: FSDP's cpu_ram_efficient_loading is handed on through this variable
    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "false")

    def build(kwargs: dict[str, object]):
        # NB: through JSON, as the file is read
        return ta.TrainingArguments(
            output_dir=str(tmp_path / "out"), **json.loads(json.dumps(kwargs))
        )

    return build


@pytest.fixture
def lightning_trainer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Build `lightning.pytorch.Trainer(**kwargs)` as on a machine with `gpus` CUDA GPUs: the
    accelerator connector asks `CUDAAccelerator.is_available` and counts devices with
    `num_cuda_devices` (fabric's, imported into pytorch's accelerator module)."""
    pytest.importorskip("lightning")
    import lightning.fabric.accelerators.cuda as fabric_cuda
    import lightning.pytorch as pl
    import lightning.pytorch.accelerators.cuda as pl_cuda
    from lightning.pytorch.accelerators.mps import MPSAccelerator

    def build(kwargs: dict[str, object], gpus: int = 8):
        monkeypatch.setattr(fabric_cuda, "num_cuda_devices", lambda: gpus)
        monkeypatch.setattr(pl_cuda, "num_cuda_devices", lambda: gpus)
        monkeypatch.setattr(pl_cuda.CUDAAccelerator, "is_available", staticmethod(lambda: True))
        monkeypatch.setattr(fabric_cuda.CUDAAccelerator, "is_available", staticmethod(lambda: True))
        monkeypatch.setattr(MPSAccelerator, "is_available", staticmethod(lambda: False))
        return pl.Trainer(
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=str(tmp_path),
            **json.loads(json.dumps(kwargs)),
        )

    return build
