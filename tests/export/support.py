"""The export tests' hand-made plans (a device that fits with 8-bit AdamW, SGD with momentum,
pure bf16, sharded over one and two machines, one that does not fit), and accelerate's own
loader and launcher run on an exported config."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainfit import TrainSpec
from trainfit.export.formats import ExportFormat, export_name
from trainfit.export.write import export_text
from trainfit.plan.options import DevicePlan, Plan, Setting, Sharded, Verdict
from trainfit.spec import OptimizerKind, Precision

MLP = "trainfit.models.zoo:emotion_mlp"


def _device(name: str, **setting: object) -> DevicePlan:
    values: dict[str, object] = {
        "precision": Precision.BF16,
        "checkpointing": False,
        "optimizer": OptimizerKind.ADAMW,
        "micro_batch": 4,
        "grad_accum": 8,
        "needed_bytes": 6 * 2**30,
    }
    values.update(setting)
    return DevicePlan(
        device=name,
        display=name,
        verdict=Verdict.WITH_CHANGES,
        setting=Setting(**values),  # type: ignore[arg-type]
        changes=(),
        max_micro_batch=4,
        tiers=(),
    )


def _sharded(name: str, gpus: int, instances: int = 1) -> DevicePlan:
    return DevicePlan(
        device=name,
        display=name,
        verdict=Verdict.NO,
        setting=None,
        changes=(),
        max_micro_batch=0,
        tiers=(),
        sharded=Sharded(
            gpus=gpus,
            per_gpu_bytes=60 * 2**30,
            precision=Precision.BF16,
            checkpointing=True,
            optimizer=OptimizerKind.ADAMW,
            micro_batch=1,
            instance="p5.48xlarge",
            instances=instances,
            usd_per_hour=None,
        ),
    )


NO = DevicePlan(
    device="t4",
    display="NVIDIA T4",
    verdict=Verdict.NO,
    setting=None,
    changes=(),
    max_micro_batch=0,
    tiers=(),
)
EIGHT_BIT = _device(
    "rtx-4060", checkpointing=True, optimizer=OptimizerKind.ADAMW_8BIT, micro_batch=4, grad_accum=8
)
MOMENTUM = _device("a100-80gb", optimizer=OptimizerKind.SGD_MOMENTUM, micro_batch=32, grad_accum=1)
PURE = _device("a100-80gb", precision=Precision.PURE_BF16, micro_batch=32, grad_accum=1)
SHARDED = _sharded("h100", 4)
TWO_MACHINES = _sharded("h100", 16, instances=2)


def _hand_plan(*devices: DevicePlan, grad_clip: float | None = 1.0, batch: int = 32) -> Plan:
    return Plan(
        spec=TrainSpec(model="gpt2", seq_len=512, grad_clip=grad_clip),
        effective_batch=batch,
        margin=0.1,
        devices=devices,
        ladder=(),
        ladder_device="",
    )


def _of(result: Plan, name: str) -> DevicePlan:
    return next(d for d in result.devices if d.device == name)


def _accelerate_launch(path: Path) -> tuple[object, dict[str, str]]:
    """accelerate's own loader, then what `accelerate launch --config_file` would set."""
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env

    config = load_config_from_file(str(path))
    assert isinstance(config, ClusterConfig)
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args, _, _ = _validate_launch_command(args)
    if args.multi_gpu or args.use_fsdp:
        env = prepare_multi_gpu_env(args)
    else:
        _, env = prepare_simple_launcher_cmd_env(args)
    return config, env


def _write_accelerate(tmp_path: Path, result: Plan, device: DevicePlan, gpus: int | None = None):
    path = tmp_path / export_name("accelerate", device.device)
    path.write_text(export_text(result, device, ExportFormat.ACCELERATE, gpus))
    return _accelerate_launch(path)
