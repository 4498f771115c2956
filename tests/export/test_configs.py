"""Config files from a plan: exact text, flags, atomic writes."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from tests.export.support import NO
from trainfit import TrainSpec
from trainfit.export.configs import config_text, hf_trainer_flags, trainfit_flags, write_configs
from trainfit.plan.options import Accumulation, Change, DevicePlan, Plan, Setting, Verdict
from trainfit.spec import OptimizerKind, Precision

SPEC = TrainSpec(model="gpt2", seq_len=512, grad_clip=1.0)
FITS = DevicePlan(
    device="rtx-4060",
    display="NVIDIA GeForce RTX 4060 8GB",
    verdict=Verdict.WITH_CHANGES,
    setting=Setting(
        precision=Precision.BF16,
        checkpointing=True,
        optimizer=OptimizerKind.ADAMW_8BIT,
        micro_batch=4,
        grad_accum=8,
        needed_bytes=6 * 2**30,
    ),
    changes=(Change.CHECKPOINTING, Accumulation(micro_batch=4, grad_accum=8)),
    max_micro_batch=5,
    tiers=(),
)
PLAN = Plan(
    spec=SPEC, effective_batch=32, margin=0.1, devices=(FITS, NO), ladder=(), ladder_device=""
)


def test_flags() -> None:
    assert trainfit_flags(PLAN, FITS) == (
        "trainfit estimate gpt2 --batch 4 --seq 512 --grad-accum 8 --precision bf16 "
        "--optimizer adamw-8bit --checkpointing --device rtx-4060"
    )
    assert hf_trainer_flags(FITS) == (
        "--per_device_train_batch_size 4 --gradient_accumulation_steps 8 --bf16 "
        "--gradient_checkpointing --optim adamw_bnb_8bit"
    )


def test_config_text() -> None:
    text = config_text(PLAN, FITS)
    today = datetime.date.today().isoformat()
    assert text.startswith(f"# trainfit plan for gpt2 on NVIDIA GeForce RTX 4060 8GB, {today}\n")
    body = text[text.index("device:") :]
    assert body == (
        "device:\n"
        '  type: "cuda"\n'
        '  name: "rtx-4060"\n'
        '  fallback: "cpu"\n'
        "model:\n"
        '  name: "gpt2"\n'
        "  use_compile: false\n"
        '  dtype: "float32"\n'
        "training:\n"
        "  batch_size: 4\n"
        "  accumulation_steps: 8\n"
        "  effective_batch_size: 32\n"
        '  mixed_precision: "bf16"\n'
        "  gradient_checkpointing: true\n"
        "  gradient_clipping: 1.0\n"
        "optimizer:\n"
        '  type: "AdamW8bit (bitsandbytes)"\n'
        "checkpoint:\n"
        "  save_best: true\n"
        "  save_latest: true\n"
        "  save_interval: 1000\n"
        "data:\n"
        "  num_workers: 4\n"
        "  pin_memory: true\n"
        "logging:\n"
        "  tensorboard: true\n"
        "  log_interval: 10\n"
    )


def test_write_configs_only_for_devices_that_fit(tmp_path: Path) -> None:
    written = write_configs(PLAN, tmp_path / "configs")
    assert [p.name for p in written] == ["config_rtx-4060.yaml"]
    assert written[0].read_text() == config_text(PLAN, FITS)
    assert sorted(p.name for p in (tmp_path / "configs").iterdir()) == ["config_rtx-4060.yaml"]


@pytest.mark.slow
def test_a_cpu_config_runs_on_the_cpu(tmp_path) -> None:
    from trainfit import TrainSpec
    from trainfit.export.configs import device_config
    from trainfit.plan.search import plan

    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    result = plan(spec, effective_batch=64, devices=("cpu", "rtx-4060"), ladder=False)
    cpu, gpu = (device_config(result, d) for d in result.devices)
    assert cpu["device"] == {"type": "cpu", "name": "cpu", "fallback": None}
    assert cpu["data"]["pin_memory"] is False  # type: ignore[index]
    assert gpu["device"] == {"type": "cuda", "name": "rtx-4060", "fallback": "cpu"}
    assert gpu["data"]["pin_memory"] is True  # type: ignore[index]
