"""The trainfit commands that check a plan's setting on the machine itself: the estimate
again, real steps beside it, and the real largest micro-batch (`trainfit measure`)."""

from __future__ import annotations

import shlex

from trainfit.hardware.catalog import get_device
from trainfit.plan.core import DevicePlan, Plan
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
    model = shlex.quote(plan.spec.model)
    common = [*spec_flags(plan.spec), f"--precision {s.precision.value}"]
    common.append(f"--optimizer {s.optimizer.value}")
    if s.checkpointing:
        common.append("--checkpointing")
    kind = get_device(d.device).kind
    on = {"cpu": "--on cpu", "mps": "--on mps"}.get(kind, "--on cuda")
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
