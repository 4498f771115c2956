"""The trainfit commands that check a plan's setting on the machine itself: the estimate
again, real steps beside it, and the real largest micro-batch (`trainfit measure`); for a live
model, which no import path names, the same checks as Python calls."""

from __future__ import annotations

import shlex

from trainfit.export.configs import LIVE_NAMES, live_call
from trainfit.hardware.catalog import get_device
from trainfit.models.live_names import is_live
from trainfit.plan.options import DevicePlan, Plan, Setting
from trainfit.report.document.model import Verify
from trainfit.spec import TrainSpec


def spec_flags(spec: TrainSpec) -> list[str]:
    """The options that describe the model's step (all but batch and setting)."""
    flags: list[str] = []
    if spec.seq_len:
        flags.append(f"--seq {spec.seq_len}")
    for i in spec.inputs:
        high = f"<{i.high}" if i.high is not None else ""
        dtype = str(i.dtype).removeprefix("torch.")
        flags.append(
            "--input " + shlex.quote(f"{i.name}={','.join(map(str, i.dims))}:{dtype}{high}")
        )
    if spec.multiplier > 1:
        flags.append(f"--multiplier {spec.multiplier}")
    flags += [f"--freeze {shlex.quote(p)}" for p in spec.freeze]
    for name, value in (("--loss", spec.loss), ("--step-fn", spec.step_fn), ("--task", spec.task)):
        if value:
            flags.append(f"{name} {shlex.quote(str(value))}")
    return flags


def verify_commands(plan: Plan, d: DevicePlan) -> Verify | None:
    """The commands for `d`'s setting (None when it has none)."""
    s = d.setting
    if s is None:
        return None
    if is_live(plan.spec.model):
        return _live_verify(plan, d, s)
    model = shlex.quote(plan.spec.model)
    common = [*spec_flags(plan.spec), f"--precision {s.precision.value}"]
    common.append(f"--optimizer {s.optimizer.value}")
    if s.checkpointing:
        common.append("--checkpointing")
    on = f"--on {_local(d)}"
    device = f"--device {d.device}"
    batch = f"--batch {s.micro_batch}" + (
        f" --grad-accum {s.grad_accum}" if s.grad_accum > 1 else ""
    )
    join = " ".join
    return Verify(
        device=d.device,
        commands=(
            (
                "the estimate of this setting",
                join(["trainfit estimate", model, batch, *common, device]),
            ),
            (
                "real steps beside the estimate (memory and time)",
                join(["trainfit measure", model, batch, *common, on, device]),
            ),
            (
                "the real largest micro-batch, keeping the effective batch",
                join(
                    [
                        "trainfit measure",
                        model,
                        *common,
                        "--max-batch",
                        f"--effective-batch {plan.effective_batch}",
                        on,
                        device,
                    ]
                ),
            ),
        ),
    )


def _local(d: DevicePlan) -> str:
    """The local device the measuring checks of `d` run on: cpu, mps, else cuda."""
    return {"cpu": "cpu", "mps": "mps"}.get(get_device(d.device).kind, "cuda")


def _live_verify(plan: Plan, d: DevicePlan, s: Setting) -> Verify:
    """`verify_commands` of a live model: `trainfit.estimate`, `trainfit.measure.measure` and
    `trainfit.find_max_batch` calls (see `export.configs.live_call`)."""
    on = _local(d)
    first = [
        ("batch", s.micro_batch),
        *([("grad_accum", s.grad_accum)] if s.grad_accum > 1 else []),
    ]
    keep = [("effective_batch", plan.effective_batch)]
    return Verify(
        device=d.device,
        commands=(
            (
                f"the estimate of this setting ({LIVE_NAMES})",
                live_call("trainfit.estimate", plan.spec, s, first, [("device", d.device)]),
            ),
            (
                "real steps beside the estimate (memory and time)",
                live_call("trainfit.measure.measure", plan.spec, s, first, [("device", on)]),
            ),
            (
                "the real largest micro-batch, keeping the effective batch",
                live_call("trainfit.find_max_batch", plan.spec, s, keep, [("device", on)]),
            ),
        ),
    )
