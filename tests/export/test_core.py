"""Trainer exports from a plan, each checked by building the real object from it: HF
`TrainingArguments`, a Lightning `Trainer`, accelerate's config loader and launcher, with the
hardware checks those constructors make patched out (CI has no GPU)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch

from trainfit import TrainSpec
from trainfit.cli.main import main
from trainfit.errors import SpecError, TrainfitError, UnknownNameError
from trainfit.export.accelerate import accelerate_config
from trainfit.export.formats import ExportFormat, export_name, require_packages
from trainfit.export.hf import hf_training_arguments
from trainfit.export.launch import launch_files
from trainfit.export.layout import (
    Beside,
    DeviceNote,
    LightningWrap,
    Machines,
    NoTf32,
    PlannedGpus,
    RoundedBatch,
    trainer_layout,
)
from trainfit.export.layout_words import device_note_text
from trainfit.export.lightning import lightning_arguments
from trainfit.export.write import export_text, write_exports
from trainfit.plan.options import DevicePlan, Plan, Setting, Sharded, Verdict
from trainfit.plan.search import plan
from trainfit.spec import OptimizerKind, Precision

MLP = "trainfit.models.zoo:emotion_mlp"


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


# --- the real constructors, with their hardware checks patched out --------------------------


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


# --- Hugging Face TrainingArguments ---------------------------------------------------------


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


# --- Lightning Trainer ----------------------------------------------------------------------


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


# --- accelerate config ----------------------------------------------------------------------


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


# --- the layout's decisions and errors ------------------------------------------------------


def test_a_batch_that_does_not_split_over_the_gpus(small: Plan) -> None:
    with pytest.raises(SpecError, match="effective batch of 64 does not split over 3 GPUs"):
        trainer_layout(small, _of(small, "h100"), gpus=3)
    with pytest.raises(SpecError, match="CUDA GPUs only"):
        trainer_layout(small, _of(small, "cpu"), gpus=2)


def test_a_sharded_batch_that_rounds_up_says_so() -> None:
    lay = trainer_layout(_hand_plan(SHARDED, batch=30), SHARDED)
    assert (lay.micro_batch, lay.grad_accum, lay.effective_batch) == (1, 8, 32)
    assert RoundedBatch(asked=30, micro_batch=1, grad_accum=8, gpus=4) in lay.notes
    lay = trainer_layout(_hand_plan(SHARDED), SHARDED, gpus=8)
    assert lay.gpus == 4 and PlannedGpus(planned=4, asked=8) in lay.notes


def test_tf32_precision_before_ampere_runs_as_fp32() -> None:
    t4 = _device("t4", precision=Precision.TF32)
    lay = trainer_layout(_hand_plan(t4), t4)
    assert not lay.tf32 and "tf32" not in hf_training_arguments(lay)
    assert NoTf32(device="t4") in lay.notes


def test_a_device_that_does_not_fit_has_nothing_to_export() -> None:
    with pytest.raises(TrainfitError, match="t4: does not fit; nothing to export"):
        trainer_layout(_hand_plan(NO), NO)
    with pytest.raises(TrainfitError, match="nothing to export: t4: does not fit"):
        write_exports(_hand_plan(NO), ["hf"], "unused")


def test_unknown_format() -> None:
    with pytest.raises(UnknownNameError, match="unknown export format 'megatron'"):
        export_name("megatron", "h100")


# --- files and the CLI ----------------------------------------------------------------------


def test_write_exports_skips_what_cannot_be_exported(tmp_path: Path) -> None:
    result = _hand_plan(EIGHT_BIT, NO, SHARDED)
    exported = write_exports(result, ["hf", "yaml", "hf"], tmp_path / "out")
    assert [p.name for p in exported.written] == [
        "hf_rtx-4060.json",
        "config_rtx-4060.yaml",
        "hf_h100.json",
    ]
    assert exported.skipped == (
        "t4: does not fit; nothing to export",
        "h100: no seed-style YAML for a sharded run (one device's settings only)",
    )
    assert DeviceNote(device="rtx-4060", note=Beside.BITSANDBYTES) in exported.notes
    assert json.loads((tmp_path / "out" / "hf_h100.json").read_text())["fsdp"] is True
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        p.name for p in exported.written
    )


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    import trainfit.io

    def fail(source: str, target: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(trainfit.io.os, "replace", fail)
    with pytest.raises(TrainfitError, match=r"cannot write .*hf_rtx-4060\.json: disk full"):
        write_exports(_hand_plan(EIGHT_BIT), ["hf"], tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_export_writes_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], training_arguments
) -> None:
    args = ["plan", MLP, "--effective-batch", "64", "--device", "h100", "--device", "cpu"]
    formats = [
        flag for fmt in ("hf", "lightning", "accelerate", "yaml") for flag in ("--export", fmt)
    ]
    assert main([*args, "--json", *formats, "--export-dir", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(
        f"{kind}_{device}.{ext}"
        for device in ("h100", "cpu")
        for kind, ext in (
            ("hf", "json"),
            ("lightning", "json"),
            ("accelerate", "yaml"),
            ("config", "yaml"),
        )
    )  # NB: and no temporary file left
    assert f"wrote {tmp_path / 'hf_h100.json'}" in capsys.readouterr().err
    args_h100 = training_arguments(json.loads((tmp_path / "hf_h100.json").read_text()))
    assert args_h100.bf16 and args_h100.per_device_train_batch_size == 64
    config, _ = _accelerate_launch(tmp_path / "accelerate_cpu.yaml")
    assert config.use_cpu is True


def test_cli_export_defaults_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "plan",
                MLP,
                "--effective-batch",
                "64",
                "--device",
                "cpu",
                "--json",
                "--export",
                "yaml",
            ]
        )
        == 0
    )
    assert [p.name for p in tmp_path.iterdir()] == ["config_cpu.yaml"]


def test_cli_export_dir_without_export(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", MLP, "--effective-batch", "64", "--export-dir", "x"]) == 1
    assert capsys.readouterr().err == (
        "trainfit: error: --export-dir needs --export (hf, lightning, accelerate or yaml)\n"
    )


@pytest.mark.parametrize(
    ("fmt", "modules", "line"),
    [
        (
            "lightning",
            ("lightning", "pytorch_lightning"),
            "needs lightning, which is not installed: pip install lightning",
        ),
        (
            "hf",
            ("accelerate",),
            "needs accelerate, which is not installed: pip install transformers accelerate",
        ),
        (
            "accelerate",
            ("accelerate",),
            "needs accelerate, which is not installed: pip install accelerate",
        ),
    ],
)
def test_a_missing_package_is_one_line(
    fmt: str,
    modules: tuple[str, ...],
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(TrainfitError, match=line):
        require_packages([fmt])
    args = ["plan", MLP, "--effective-batch", "64", "--device", "cpu", "--export", fmt]
    assert main([*args, "--export-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"trainfit: error: the {fmt} export {line}\n"
    assert captured.out == ""  # NB: refused before planning
    assert list(tmp_path.iterdir()) == []


def test_yaml_needs_nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("lightning", "pytorch_lightning", "transformers", "accelerate"):
        monkeypatch.setitem(sys.modules, module, None)
    require_packages(["yaml"])


def test_an_unwritable_export_dir_stops_the_command_before_planning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["plan", MLP, "--effective-batch", "64", "--device", "cpu", "--export", "yaml"]
    assert main([*args, "--export-dir", "/proc/x"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("trainfit: error: cannot write to the export directory /proc/x")
    assert captured.err.count("\n") == 1
    assert captured.out == ""  # NB: refused before planning


def test_the_yaml_of_a_data_parallel_run_agrees_with_the_other_files(
    small: Plan, tmp_path: Path
) -> None:
    exported = write_exports(small, ["hf", "lightning", "yaml"], tmp_path, gpus=4)
    assert tmp_path / "config_h100.yaml" in exported.written
    hf = json.loads((tmp_path / "hf_h100.json").read_text())
    lightning = json.loads((tmp_path / "lightning_h100.json").read_text())
    text = (tmp_path / "config_h100.yaml").read_text()
    micro, accum = hf["per_device_train_batch_size"], hf["gradient_accumulation_steps"]
    assert micro * accum * 4 == 64 and lightning["dataloader"]["batch_size"] == micro
    assert f"  batch_size: {micro}\n" in text
    assert f"  accumulation_steps: {accum}\n" in text
    assert "  gpus: 4\n" in text
    assert "  effective_batch_size: 64\n" in text
    assert f"--per_device_train_batch_size {micro} --gradient_accumulation_steps {accum}" in text
    assert "# data parallel over 4 GPUs: batch_size and accumulation_steps are each GPU's" in text
    # one GPU: the plan's setting, no GPU count
    one = export_text(small, _of(small, "h100"), ExportFormat.YAML)
    assert "  batch_size: 64\n" in one and "gpus:" not in one


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


def test_a_device_that_fits_alone_exports_one_gpus_launch_files(small: Plan) -> None:
    files = dict(launch_files(small, _of(small, "h100"), ExportFormat.TORCHRUN))
    settings = json.loads(files["fsdp2_h100.json"])
    assert settings["predicted_per_rank_bytes"] == _of(small, "h100").setting.needed_bytes
    assert settings["predicted_label"] == "modelled"
