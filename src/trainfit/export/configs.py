"""Ready-to-use training configs from a plan: one YAML file per device, plus the same settings
as command-line flags (trainfit's own, to re-check the estimate, and Hugging Face Trainer's).

The YAML follows the shape of the seeds' `config_*.yaml` (device with fallback, model, training,
optimizer, checkpoint, data, logging). Only what the plan decided carries a number trainfit
computed (micro-batch, accumulation, precision, checkpointing, optimizer); the data-loader,
checkpoint and logging entries are conventional defaults and say so in a comment. Files are
written atomically (a temporary file renamed into place), so an interrupted run leaves no
half-written config.

Given the export's `TrainerLayout` (`trainfit.export.layout.trainer_layout`, as `plan --export
yaml` does), the batch fields are the layout's: each GPU's micro-batch and accumulation, the GPU
count and the effective batch over all GPUs, as in the hf, lightning and accelerate files beside
it; without one, the plan's one-device setting.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

from trainfit.errors import TrainfitError
from trainfit.export.layout import TrainerLayout
from trainfit.export.layout_words import layout_notes_text
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.hardware.units import GIB
from trainfit.io import write_atomically
from trainfit.models.live_names import is_live, model_label
from trainfit.optim import optimizer_entry
from trainfit.plan.options import DevicePlan, Plan, Setting
from trainfit.plan.words import changes_text
from trainfit.spec import Precision, TrainSpec


def _kind(name: str) -> DeviceKind:
    try:
        return get_device(name).kind
    except TrainfitError:
        return DeviceKind.CUDA  # a plan's device was resolved when planned; a GPU unless named cpu


def _batch(s: Setting, lay: TrainerLayout | None) -> tuple[int, int, int]:
    """(micro-batch per GPU, accumulation, GPUs): the layout's when given, else the setting's."""
    if lay is None:
        return s.micro_batch, s.grad_accum, 1
    return lay.micro_batch, lay.grad_accum, lay.gpus


def device_config(
    plan: Plan, device: DevicePlan, lay: TrainerLayout | None = None
) -> dict[str, object]:
    """The config of one device's chosen setting as nested dicts (YAML-ready); with `lay`,
    its batch split (per GPU, over `lay.gpus` GPUs)."""
    s = _setting(device)
    micro, accum, gpus = _batch(s, lay)
    mixed = s.precision.value if s.precision in (Precision.BF16, Precision.FP16) else False
    dtype = "bfloat16" if s.precision is Precision.PURE_BF16 else "float32"
    # NB: a CPU plan runs on the CPU: no fallback, and no pinned memory (only useful for
    # copies to a GPU)
    kind = DeviceKind.CPU if device.device == "cpu" else _kind(device.device)
    on_cpu = kind is DeviceKind.CPU
    return {
        "device": {
            "type": kind.value,
            "name": device.device,
            "fallback": None if on_cpu else "cpu",
        },
        "model": {"name": model_label(plan.spec.model), "use_compile": False, "dtype": dtype},
        "training": {
            "batch_size": micro,
            "accumulation_steps": accum,
            **({"gpus": gpus} if gpus > 1 else {}),
            "effective_batch_size": micro * accum * gpus,
            "mixed_precision": mixed,
            "gradient_checkpointing": s.checkpointing,
            "gradient_clipping": plan.spec.grad_clip,
        },
        "optimizer": {"type": optimizer_entry(s.optimizer).short_name},
        "checkpoint": {"save_best": True, "save_latest": True, "save_interval": 1000},
        # NB: pinned memory speeds up copies to a discrete GPU; a Mac's memory is unified
        "data": {"num_workers": 4, "pin_memory": kind is DeviceKind.CUDA},
        "logging": {"tensorboard": True, "log_interval": 10},
    }


LIVE_NAMES = "net, batch: your module and its sample batch, with its loss= or step_fn= if any"
"""What the Python calls that check a live model's setting (`live_call`) name."""


def live_call(
    function: str,
    spec: TrainSpec,
    s: Setting,
    first: Sequence[tuple[str, object]],
    last: Sequence[tuple[str, object]],
) -> str:
    """The Python call that checks a live model's setting `s`, as a `trainfit` command checks
    a named model's (no import path names a live one): `function(model=net, sample=batch,
    ...)` with `first`, the setting's fields, then `last` (see `LIVE_NAMES`)."""
    pairs = list(first)
    if spec.multiplier > 1:
        pairs.append(("multiplier", spec.multiplier))
    if spec.freeze:
        pairs.append(("freeze", list(spec.freeze)))
    pairs += [("precision", s.precision.value), ("optimizer", s.optimizer.value)]
    if s.checkpointing:
        pairs.append(("checkpointing", True))
    pairs += last
    return f"{function}(model=net, sample=batch, {', '.join(f'{k}={v!r}' for k, v in pairs)})"


def trainfit_flags(plan: Plan, device: DevicePlan, lay: TrainerLayout | None = None) -> str:
    """The `trainfit estimate` command that re-checks this setting (one GPU's step); for a
    live model, the Python call (`live_call`)."""
    s = _setting(device)
    micro, accum, _ = _batch(s, lay)
    spec = plan.spec
    if is_live(spec.model):
        first = [("batch", micro), *([("grad_accum", accum)] if accum > 1 else [])]
        call = live_call("trainfit.estimate", spec, s, first, [("device", device.device)])
        return f"{call} ({LIVE_NAMES})"
    parts = ["trainfit estimate", spec.model, f"--batch {micro}"]
    if spec.seq_len:
        parts.append(f"--seq {spec.seq_len}")
    for i in spec.inputs:
        high = f"<{i.high}" if i.high is not None else ""
        dtype = str(i.dtype).removeprefix("torch.")
        parts.append(f"--input '{i.name}={','.join(map(str, i.dims))}:{dtype}{high}'")
    if accum > 1:
        parts.append(f"--grad-accum {accum}")
    parts += [f"--precision {s.precision.value}", f"--optimizer {s.optimizer.value}"]
    if s.checkpointing:
        parts.append("--checkpointing")
    parts.append(f"--device {device.device}")
    return " ".join(parts)


def hf_trainer_flags(device: DevicePlan, lay: TrainerLayout | None = None) -> str:
    """The same setting as Hugging Face `TrainingArguments` command-line flags."""
    s = _setting(device)
    micro, accum, _ = _batch(s, lay)
    parts = [
        f"--per_device_train_batch_size {micro}",
        f"--gradient_accumulation_steps {accum}",
    ]
    if s.precision is Precision.BF16:
        parts.append("--bf16")
    elif s.precision is Precision.FP16:
        parts.append("--fp16")
    if s.checkpointing:
        parts.append("--gradient_checkpointing")
    optimizer = optimizer_entry(s.optimizer)
    parts.append(f"--optim {optimizer.hf_name(_kind(device.device))}")
    if (args := optimizer.hf_optim_args()) is not None:
        parts.append(f"--optim_args {args}")
    return " ".join(parts)


def to_yaml(data: dict[str, object], header: list[str]) -> str:
    """A small YAML emitter for nested dicts of scalars (no dependency)."""
    lines = [f"# {line}" for line in header]

    def scalar(value: object) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'

    def emit(mapping: dict[str, object], indent: int) -> None:
        for key, value in mapping.items():
            if isinstance(value, dict):
                lines.append(" " * indent + f"{key}:")
                emit(value, indent + 2)
            else:
                lines.append(" " * indent + f"{key}: {scalar(value)}")

    emit(data, 0)
    return "\n".join(lines) + "\n"


def config_text(
    plan: Plan, device: DevicePlan, lay: TrainerLayout | None = None, *, dated: bool = True
) -> str:
    """The YAML file of one device, with what trainfit predicted in its header; with `lay`,
    its batch split and notes (see the module). `dated=False` leaves today's date out (a
    report's files are the same whenever they are made)."""
    s = _setting(device)
    gpus = 1 if lay is None else lay.gpus
    header = [
        f"trainfit plan for {model_label(plan.spec.model)} on {device.display}"
        + (f", {datetime.date.today().isoformat()}" if dated else ""),
        f"verdict: {device.verdict.value}"
        + (f" ({'; '.join(changes_text(device))})" if device.changes else ""),
        f"predicted device memory needed: {s.needed_bytes / GIB:.2f} GiB "
        f"(plan keeps {plan.margin:.0%} of the device free"
        + (
            "; modelled for an Apple GPU, not measured)"
            if _kind(device.device) is DeviceKind.MPS
            else ")"
        ),
        "computed: batch_size, accumulation_steps, mixed_precision, gradient_checkpointing,",
        "optimizer; conventional defaults: checkpoint, data, logging, use_compile",
        f"re-check: {trainfit_flags(plan, device, lay)}",
        f"Hugging Face Trainer: {hf_trainer_flags(device, lay)}",
    ]
    if gpus > 1:
        header.append(
            f"data parallel over {gpus} GPUs: batch_size and accumulation_steps are each GPU's; "
            "effective_batch_size is over all of them"
        )
    if lay is not None:
        header += layout_notes_text(lay.notes)
    return to_yaml(device_config(plan, device, lay), header)


def write_configs(plan: Plan, directory: Path) -> list[Path]:
    """Write `config_<device>.yaml` for every device with a setting; return the paths."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrainfitError(f"cannot create the config directory {directory}: {exc}") from exc
    written = []
    for device in plan.devices:
        if device.setting is None:
            continue
        path = directory / f"config_{device.device}.yaml"
        write_atomically(path, config_text(plan, device))
        written.append(path)
    return written


def _setting(device: DevicePlan) -> Setting:
    if device.setting is None:
        raise TrainfitError(f"{device.device}: {device.verdict.value}; no config to write")
    return device.setting
