"""A plan's settings as the files the trainers people use read: Hugging Face `TrainingArguments`
keyword arguments (JSON), PyTorch Lightning `Trainer` arguments (JSON), an accelerate config
(YAML, the shape `accelerate config` writes) and the seed-style YAML of `trainfit.export.configs`.

Each export starts from one `Layout` per device: the plan's setting (or, for a GPU that needs
several, its `Sharded` verdict) with the GPU count, the optimizer and the dataloader settings
decided once, so that the four files agree. What the plan computed: the micro-batch,
accumulation, precision, gradient checkpointing, optimizer kind, GPU count and sharding. What
is decided here where the plan is silent (each a conventional choice, written down):

- **optimizer**: AdamW and Adam as `adamw_torch_fused` on CUDA GPUs, `adamw_torch` on a CPU or
  an Apple GPU (Adam is AdamW with HF's default weight decay 0); the 8-bit optimizer as
  `adamw_bnb_8bit` (bitsandbytes must be installed where the job trains); `adafactor`; `sgd`,
  with `momentum=0.9` for sgd-momentum (the plan models the momentum buffer, not its value).
- **tf32**: on only for CUDA GPUs of compute capability 8.0 or more, when the plan's precision
  is tf32 or mixed (fp16/bf16 autocast leaves some matmuls in fp32); left unset otherwise (a
  plain fp32 plan keeps fp32 arithmetic; TrainingArguments refuses tf32 before Ampere).
- **dataloader**: 4 workers kept alive between epochs, pinned memory on CUDA only (as the
  seed-style YAML's conventional defaults).
- **gradient checkpointing** with `use_reentrant=False` (the non-reentrant variant PyTorch
  recommends); under FSDP as the engine's activation checkpointing instead (HF warns that
  `gradient_checkpointing` there adds an all-gather).
- **gradient clipping** from the spec's `grad_clip`; when the spec has none it is not set, so
  HF's default `max_grad_norm=1.0` applies and Lightning does not clip.
- **GPUs**: one device runs alone (Lightning strategy "auto", accelerate "NO"); `gpus` above 1
  (default: the plan's run, `--gpus`) runs data parallel ("ddp", "MULTI_GPU") with the
  effective batch split as the plan times it; a GPU that needs several is exported as FSDP2
  full sharding over the plan's GPU count (machines of the cheapest catalog instance).
- **pure-bf16** has no trainer flag: no autocast, and a note to load the model in bf16.

A device without a setting and without a sharded verdict (does not fit, not estimated, an
offloaded-only verdict), or one the GPU count does not suit, is skipped with a note;
`write_exports` raises when no device is left, with every reason.
The lightning, hf and accelerate exports need their package installed (the hf one needs
accelerate too, as `TrainingArguments` does): a TrainfitError names what to install.

`torchrun` and `deepspeed` write each device's multi-GPU plan (`DevicePlan.distributed`, or one
GPU for a device that fits alone) as launch files: `trainfit.export.torchrun` and
`trainfit.export.deepspeed` (see docs/multi-gpu.md).

Known limitations: the four trainer files above do not carry CPU offload; data parallel and
sharded runs are modelled with one GPU's figures (DDP's gradient buckets and the engines'
gathered layers are not counted, see `trainfit.plan.core.Sharded`); multi-machine files leave the
main process address and each machine's rank to the user; the Lightning file's `module` and
`dataloader` sections are for the user's own LightningModule and DataLoader (the Trainer has no
such arguments); the Lightning file's `strategy: "fsdp"` is Lightning 2.x's FSDPStrategy
(FSDP1), which without an auto-wrap policy wraps the root module only, not each layer as the
plan's memory assumes: the file's `notes` (and `write_exports`' notes) say to pass
`FSDPStrategy(auto_wrap_policy={Block})` or use `ModelParallelStrategy` (FSDP2). The
seed-style YAML carries the layout's batch split (each GPU's micro-batch and accumulation, the
GPU count); a sharded verdict has none.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from trainfit.distributed.search import DistributedPlan
from trainfit.errors import SpecError, TrainfitError, UnknownNameError
from trainfit.hardware.catalog import get_device
from trainfit.plan.core import DevicePlan, Plan, _split
from trainfit.spec import OptimizerKind, Precision


class ExportFormat(str, Enum):
    """What a plan can be exported as."""

    HF = "hf"
    """Hugging Face `TrainingArguments` keyword arguments (JSON)."""
    LIGHTNING = "lightning"
    """PyTorch Lightning `Trainer` arguments, with the DataLoader's and module's (JSON)."""
    ACCELERATE = "accelerate"
    """An `accelerate launch --config_file` file (YAML)."""
    YAML = "yaml"
    """The seed-style config of `trainfit.export.configs` (YAML)."""
    TORCHRUN = "torchrun"
    """`launch_<device>.sh` + `fsdp2_<device>.json` + `train_fsdp2.py` (trainfit.distributed)."""
    DEEPSPEED = "deepspeed"
    """`ds_config_<device>.json` + `accelerate_ds_<device>.yaml` (schema-checked)."""


_FILE = {
    ExportFormat.HF: "hf_{}.json",
    ExportFormat.LIGHTNING: "lightning_{}.json",
    ExportFormat.ACCELERATE: "accelerate_{}.yaml",
    ExportFormat.YAML: "config_{}.yaml",
    ExportFormat.TORCHRUN: "launch_{}.sh",
    ExportFormat.DEEPSPEED: "ds_config_{}.json",
}
_LAUNCH = (ExportFormat.TORCHRUN, ExportFormat.DEEPSPEED)
"""Formats of several files per device, from the device's multi-GPU plan."""

_PACKAGES: dict[ExportFormat, tuple[tuple[tuple[str, ...], ...], str]] = {
    # NB: per format, the packages that must all be importable (each entry: any one of its
    # names), and the install command
    ExportFormat.HF: ((("transformers",), ("accelerate",)), "pip install transformers accelerate"),
    ExportFormat.LIGHTNING: ((("lightning", "pytorch_lightning"),), "pip install lightning"),
    ExportFormat.ACCELERATE: ((("accelerate",),), "pip install accelerate"),
    ExportFormat.YAML: ((), ""),
    ExportFormat.TORCHRUN: ((), ""),
    ExportFormat.DEEPSPEED: ((), ""),
}

DATALOADER_WORKERS = 4
"""Worker processes per DataLoader (a conventional default, as the seed-style YAML's)."""

SGD_MOMENTUM = 0.9
"""Momentum written for the sgd-momentum optimizer (the plan models the buffer only)."""

_HF_OPTIM = {
    OptimizerKind.ADAMW: "adamw_torch",
    OptimizerKind.ADAM: "adamw_torch",
    OptimizerKind.SGD: "sgd",
    OptimizerKind.SGD_MOMENTUM: "sgd",
    OptimizerKind.ADAFACTOR: "adafactor",
    OptimizerKind.ADAMW_8BIT: "adamw_bnb_8bit",
}
_TORCH_OPTIMIZER = {
    OptimizerKind.ADAMW: "torch.optim.AdamW",
    OptimizerKind.ADAM: "torch.optim.Adam",
    OptimizerKind.SGD: "torch.optim.SGD",
    OptimizerKind.SGD_MOMENTUM: "torch.optim.SGD",
    OptimizerKind.ADAFACTOR: "torch.optim.Adafactor",
    OptimizerKind.ADAMW_8BIT: "bitsandbytes.optim.AdamW8bit",
}
_LIGHTNING_PRECISION = {
    Precision.FP32: "32-true",
    Precision.TF32: "32-true",
    Precision.FP16: "16-mixed",
    Precision.BF16: "bf16-mixed",
    Precision.PURE_BF16: "bf16-true",
}
_ACCELERATE_PRECISION = {
    Precision.FP32: "no",
    Precision.TF32: "no",
    Precision.FP16: "fp16",
    Precision.BF16: "bf16",
    Precision.PURE_BF16: "no",
}
_LIGHTNING_ACCELERATOR = {"cuda": "gpu", "cpu": "cpu", "mps": "mps"}


def hf_optim(optimizer: OptimizerKind, kind: str) -> str:
    """The `TrainingArguments.optim` string of `optimizer` on a device of `kind`: the fused
    AdamW kernel on CUDA, the plain one elsewhere."""
    name = _HF_OPTIM[optimizer]
    return "adamw_torch_fused" if name == "adamw_torch" and kind == "cuda" else name


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """How one device of a plan trains, in terms every export shares."""

    device: str
    """The catalog name of the device."""
    kind: str
    """"cuda", "mps" or "cpu"."""
    gpus: int
    """Processes in all (one per GPU); 1 on one device."""
    machines: int
    """Machines the processes span (sharded plans over more GPUs than one machine has)."""
    sharded: bool
    """FSDP full sharding of the model states over `gpus` GPUs."""
    precision: Precision
    checkpointing: bool
    optimizer: OptimizerKind
    micro_batch: int
    """Samples per GPU per forward/backward."""
    grad_accum: int
    """Micro-batches per optimizer step on each GPU."""
    tf32: bool
    """TF32 matmuls on (see the module docstring)."""
    grad_clip: float | None
    notes: tuple[str, ...] = ()
    """What a user must do beside the file, or what differs from the plan, in words."""

    @property
    def effective_batch(self) -> int:
        """Samples per optimizer step over all GPUs."""
        return self.micro_batch * self.grad_accum * self.gpus


def layout(plan: Plan, device: DevicePlan, gpus: int | None = None) -> Layout:
    """The layout of `device`'s setting on `gpus` GPUs (None: the plan's run's GPU count, 1
    without a run), or of its sharded verdict; TrainfitError when it has neither, or the
    effective batch does not split over the GPUs."""
    requested = gpus if gpus is not None else (plan.run.gpus if plan.run is not None else 1)
    if requested < 1:
        raise SpecError([f"gpus must be a positive integer, got {requested}"])
    kind, capability = _kind(device.device)
    notes: list[str] = []
    effective = plan.effective_batch
    if device.setting is not None:
        s = device.setting
        precision, checkpointing, optimizer = s.precision, s.checkpointing, s.optimizer
        micro, accum, machines, sharded = s.micro_batch, s.grad_accum, 1, False
        if requested > 1:
            if kind != "cuda":
                raise SpecError(
                    [
                        f"{device.device}: runs over several GPUs are exported for CUDA GPUs "
                        f"only, got gpus={requested}"
                    ]
                )
            if effective % requested:
                raise SpecError(
                    [
                        f"an effective batch of {effective} does not split over {requested} "
                        f"GPUs: use a multiple of {requested}"
                    ]
                )
            # NB: each GPU's share split as the plan times it (the chosen micro-batch or less)
            micro, accum = _split(effective // requested, s.micro_batch)
            notes.append(
                f"data parallel over {requested} GPUs: the plan's memory is one GPU's; DDP adds "
                "its gradient buckets (about one more copy of the gradients) per GPU"
            )
    elif device.sharded is not None:
        sh = device.sharded
        precision, checkpointing, optimizer = sh.precision, sh.checkpointing, sh.optimizer
        if requested not in (1, sh.gpus):
            notes.append(f"sharded over the plan's {sh.gpus} GPUs, not the {requested} asked for")
        # NB: the verdict's GPU count is the one whose memory was modelled
        requested = sh.gpus
        micro, sharded = sh.micro_batch, True
        machines = max(sh.instances, 1)
        accum = max(1, math.ceil(effective / (requested * micro)))
        notes.append(
            f"FSDP full sharding over {requested} GPUs at {sh.per_gpu_bytes / 2**30:.2f} GiB "
            "each (modelled, not checked on GPUs)"
        )
        if machines > 1:
            notes.append(
                f"{machines} machines ({sh.instance}): set machine_rank, main_process_ip and "
                "main_process_port on each"
            )
    else:
        raise TrainfitError(f"{device.device}: {device.verdict.value}; nothing to export")
    if micro * accum * requested != effective:
        notes.append(
            f"the effective batch rounds from {effective} to {micro * accum * requested} "
            f"({micro} x {accum} accumulation x {requested} GPUs)"
        )
    tf32 = (
        kind == "cuda"
        and precision in (Precision.TF32, Precision.FP16, Precision.BF16)
        and capability >= (8, 0)
    )
    if precision is Precision.TF32 and not tf32:
        notes.append(f"{device.device} has no TF32 (compute capability 8.0 on): runs as fp32")
    if precision is Precision.PURE_BF16:
        notes.append(
            "pure bf16 has no trainer flag: load the model with dtype=torch.bfloat16 (no autocast)"
        )
    if optimizer is OptimizerKind.ADAMW_8BIT:
        notes.append("the 8-bit optimizer needs bitsandbytes where the job trains")
    return Layout(
        device=device.device,
        kind=kind,
        gpus=requested,
        machines=machines,
        sharded=sharded,
        precision=precision,
        checkpointing=checkpointing,
        optimizer=optimizer,
        micro_batch=micro,
        grad_accum=accum,
        tf32=tf32,
        grad_clip=plan.spec.grad_clip,
        notes=tuple(notes),
    )


def _kind(name: str) -> tuple[str, tuple[int, int]]:
    """The device's kind and compute capability."""
    try:
        found = get_device(name)
    except TrainfitError:
        # NB: a plan's devices were resolved when planned (a user catalog no longer active):
        # a GPU, as configs._kind takes it, without the capability tf32 needs
        return "cuda", (0, 0)
    return found.kind, found.compute_capability


def _fsdp_fields(lay: Layout) -> dict[str, object]:
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


def hf_training_arguments(lay: Layout) -> dict[str, object]:
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
    kwargs["optim"] = hf_optim(lay.optimizer, lay.kind)
    if lay.optimizer is OptimizerKind.SGD_MOMENTUM:
        kwargs["optim_args"] = f"momentum={SGD_MOMENTUM}"
    if lay.grad_clip is not None:
        kwargs["max_grad_norm"] = lay.grad_clip
    kwargs["dataloader_num_workers"] = DATALOADER_WORKERS
    kwargs["dataloader_pin_memory"] = lay.kind == "cuda"
    kwargs["dataloader_persistent_workers"] = DATALOADER_WORKERS > 0
    if lay.kind == "cpu":
        kwargs["use_cpu"] = True
    if lay.sharded:
        kwargs["fsdp"] = True
        kwargs["fsdp_config"] = _fsdp_fields(lay)
    return kwargs


def lightning_fsdp_note(lay: Layout) -> str:
    """What `strategy: "fsdp"` leaves to the user: Lightning 2.x's `FSDPStrategy` (FSDP1)
    without an auto-wrap policy wraps the root module only; the plan's memory is per-layer
    full sharding."""
    checkpointing = ", activation_checkpointing_policy={Block}" if lay.checkpointing else ""
    return (
        'lightning strategy "fsdp" is FSDPStrategy with no auto-wrap policy, which wraps the root '
        "module only (each GPU gathers every parameter at once); the plan's memory assumes "
        "each layer wrapped (FSDP2-style full sharding): pass "
        f"Trainer(strategy=FSDPStrategy(auto_wrap_policy={{Block}}{checkpointing}), ...) "
        "with your model's repeated block class as Block, or ModelParallelStrategy() with "
        "fully_shard on each block and then the model in configure_model (FSDP2)"
    )


def lightning_arguments(lay: Layout) -> dict[str, object]:
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
    optimizer_kwargs: dict[str, object] = {}
    if lay.optimizer in (OptimizerKind.ADAMW, OptimizerKind.ADAM) and lay.kind == "cuda":
        optimizer_kwargs["fused"] = True
    if lay.optimizer is OptimizerKind.SGD_MOMENTUM:
        optimizer_kwargs["momentum"] = SGD_MOMENTUM
    module: dict[str, object] = {
        "gradient_checkpointing": lay.checkpointing,
        "optimizer": _TORCH_OPTIMIZER[lay.optimizer],
        "optimizer_kwargs": optimizer_kwargs,
    }
    if lay.tf32:
        module["float32_matmul_precision"] = "high"
    dataloader: dict[str, object] = {
        "batch_size": lay.micro_batch,
        "num_workers": DATALOADER_WORKERS,
        "pin_memory": lay.kind == "cuda",
        "persistent_workers": DATALOADER_WORKERS > 0,
    }
    out: dict[str, object] = {"trainer": trainer, "dataloader": dataloader, "module": module}
    if lay.sharded:
        out["notes"] = [lightning_fsdp_note(lay)]
    return out


def accelerate_config(lay: Layout) -> dict[str, object]:
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
    if lay.kind == "cuda":
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
            "use_cpu": lay.kind == "cpu",
        }
    )
    if lay.sharded:
        config["fsdp_config"] = {f"fsdp_{k}": v for k, v in _fsdp_fields(lay).items()}
    return config


def accelerate_text(plan: Plan, lay: Layout, display: str = "") -> str:
    """The accelerate config file, with what the Accelerator and the loop take in its header
    (accelerate's config has no batch, accumulation or optimizer fields)."""
    from trainfit.export.configs import to_yaml

    header = [
        f"trainfit plan for {plan.spec.model} on {display or lay.device}: "
        f"accelerate launch --config_file accelerate_{lay.device}.yaml train.py",
        f"in train.py: Accelerator(gradient_accumulation_steps={lay.grad_accum}), DataLoader "
        f"batch_size={lay.micro_batch}, optimizer {_TORCH_OPTIMIZER[lay.optimizer]}"
        + (", gradient checkpointing" if lay.checkpointing and not lay.sharded else "")
        + (f", clip_grad_norm_ at {lay.grad_clip:g}" if lay.grad_clip is not None else ""),
        *lay.notes,
    ]
    return to_yaml(accelerate_config(lay), header)


def export_text(
    plan: Plan, device: DevicePlan, fmt: ExportFormat | str, gpus: int | None = None
) -> str:
    """The file of `device` in `fmt` (see `ExportFormat`)."""
    fmt = _format(fmt)
    if fmt is ExportFormat.YAML and device.setting is None:
        raise TrainfitError(
            f"{device.device}: {device.verdict.value}; the seed-style YAML describes one "
            "device's setting, and this one has none"
        )
    lay = layout(plan, device, gpus)
    if fmt is ExportFormat.YAML:
        from trainfit.export.configs import config_text

        # NB: the layout's batch split, as the other files of the same directory
        return config_text(plan, device, lay)
    if fmt is ExportFormat.HF:
        return json.dumps(hf_training_arguments(lay), indent=2) + "\n"
    if fmt is ExportFormat.LIGHTNING:
        return json.dumps(lightning_arguments(lay), indent=2) + "\n"
    return accelerate_text(plan, lay, device.display)


def export_name(fmt: ExportFormat | str, device: str) -> str:
    """The file name of `device`'s export in `fmt`, e.g. `hf_h100.json`."""
    return _FILE[_format(fmt)].format(device)


def require_packages(formats: Iterable[ExportFormat | str]) -> None:
    """TrainfitError naming what to install when a format's package is missing (checked
    without importing it)."""
    for fmt in (_format(f) for f in formats):
        needs, command = _PACKAGES[fmt]
        missing = [names[0] for names in needs if not any(_installed(name) for name in names)]
        if missing:
            raise TrainfitError(
                f"the {fmt.value} export needs {' and '.join(missing)}, which "
                f"{'is' if len(missing) == 1 else 'are'} not installed: {command}"
            )


def check_directory(directory: Path | str, what: str = "export directory") -> None:
    """Create `directory` if needed and check that a file can be written in it: TrainfitError
    naming it otherwise (the CLI checks before planning, which takes seconds)."""
    import tempfile

    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise TrainfitError(f"cannot write to the {what} {directory}: {exc}") from exc


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # NB: a module set to None, or without a spec
        return False


@dataclass(frozen=True, kw_only=True, slots=True)
class Exported:
    """What `write_exports` wrote and what it skipped."""

    written: tuple[Path, ...]
    skipped: tuple[str, ...]
    """One line per device and format not written, with why."""
    notes: tuple[str, ...]
    """Per device, what to do beside the files (`Layout.notes`), prefixed with the device."""


def write_exports(
    plan: Plan,
    formats: Iterable[ExportFormat | str],
    directory: Path | str,
    gpus: int | None = None,
) -> Exported:
    """Write one file per device and format into `directory` (created if needed), each
    atomically; devices without anything to export are skipped. TrainfitError when a format's
    package is missing, or nothing could be written."""
    from trainfit.io import write_atomically

    chosen = list(dict.fromkeys(_format(f) for f in formats))
    if not chosen:
        raise SpecError(["no export format given: choose hf, lightning, accelerate or yaml"])
    require_packages(chosen)
    files: list[tuple[Path, str]] = []
    skipped: list[str] = []
    notes: list[str] = []
    directory = Path(directory)
    for device in plan.devices:
        for fmt in (f for f in chosen if f in _LAUNCH):
            try:
                files += [(directory / n, t) for n, t in launch_files(plan, device, fmt)]
            except TrainfitError as exc:
                skipped.append(f"{device.device} ({fmt.value}): {exc}")
        if all(f in _LAUNCH for f in chosen):
            continue
        try:
            lay = layout(plan, device, gpus)
        except TrainfitError as exc:
            # NB: a device that does not fit, or one the GPU count does not suit (a CPU, a
            # batch that does not split): the others are still exported
            skipped.append(
                str(exc) if str(exc).startswith(device.device) else f"{device.device}: {exc}"
            )
            continue
        notes += [f"{device.device}: {note}" for note in lay.notes]
        if lay.sharded and ExportFormat.LIGHTNING in chosen:
            notes.append(f"{device.device}: {lightning_fsdp_note(lay)}")
        for fmt in (f for f in chosen if f not in _LAUNCH):
            if fmt is ExportFormat.YAML and device.setting is None:
                skipped.append(
                    f"{device.device}: no seed-style YAML for a sharded run (one device's "
                    "settings only)"
                )
                continue
            files.append(
                (directory / export_name(fmt, device.device), export_text(plan, device, fmt, gpus))
            )
    if not files:
        raise TrainfitError(
            "nothing to export: "
            + "; ".join(skipped or [f"no device in the plan ({len(plan.devices)})"])
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrainfitError(f"cannot create the export directory {directory}: {exc}") from exc
    for path, text in files:
        write_atomically(path, text)
    return Exported(
        written=tuple(path for path, _ in files), skipped=tuple(skipped), notes=tuple(notes)
    )


def launch_files(plan: Plan, device: DevicePlan, fmt: ExportFormat) -> list[tuple[str, str]]:
    """The torchrun or deepspeed files of `device`: from its multi-GPU plan, else (a device
    that fits alone) one GPU with its setting. TrainfitError when there is neither."""
    import dataclasses

    from trainfit.export.deepspeed import deepspeed_files
    from trainfit.export.torchrun import torchrun_files

    found = device.distributed
    if found is None:
        if device.setting is None or get_device(device.device).kind != "cuda":
            raise TrainfitError(
                device.distributed_note
                or f"{device.verdict.value}, and no multi-GPU plan (CUDA GPUs only)"
            )
        found = _one_gpu(plan, device)
    spec = dataclasses.replace(
        plan.spec, precision=found.precision, checkpointing=found.checkpointing
    )
    if fmt is ExportFormat.TORCHRUN:
        return torchrun_files(spec, found, device.device, plan.effective_batch)
    return deepspeed_files(spec, found, device.device)


def _one_gpu(plan: Plan, device: DevicePlan) -> DistributedPlan:
    """A one-GPU DistributedPlan of a device whose setting fits (DDP over one GPU)."""
    from trainfit.distributed.memory import RankMemory
    from trainfit.distributed.strategy import Offload, Strategy

    s = device.setting
    assert s is not None
    memory = RankMemory(
        strategy=Strategy.DDP,
        offload=Offload.NONE,
        gpus=1,
        nodes=1,
        micro_batch=s.micro_batch,
        total_bytes=s.needed_bytes,
        parameters_bytes=0,
        gradients_bytes=0,
        optimizer_state_bytes=0,
        activations_bytes=0,
        other_bytes=0,
        engine_bytes=0,
        nccl_bytes=0,
        context_bytes=0,
        host_bytes_per_node=0,
        label="modelled",
    )
    return DistributedPlan(
        device=device.device,
        strategy=Strategy.DDP,
        offload=Offload.NONE,
        gpus=1,
        nodes=1,
        checkpointing=s.checkpointing,
        micro_batch=s.micro_batch,
        grad_accum=s.grad_accum,
        memory=memory,
        budget_bytes=0,
        comm=None,
        step_seconds=None,
        instance="",
        instances=0,
        usd_per_hour=None,
        precision=s.precision,
    )


def _format(fmt: ExportFormat | str) -> ExportFormat:
    if isinstance(fmt, ExportFormat):
        return fmt
    for member in ExportFormat:
        if member.value == str(fmt).strip().lower():
            return member
    raise UnknownNameError("export format", str(fmt), [m.value for m in ExportFormat])


__all__ = [
    "DATALOADER_WORKERS",
    "ExportFormat",
    "Exported",
    "Layout",
    "accelerate_config",
    "accelerate_text",
    "check_directory",
    "export_name",
    "export_text",
    "hf_optim",
    "hf_training_arguments",
    "launch_files",
    "layout",
    "lightning_arguments",
    "lightning_fsdp_note",
    "require_packages",
    "write_exports",
]
