"""Helpers for the user's own tests: `assert_fits(model, sample, device=..., batch=...)`.

    from trainfit.testing import assert_fits

    def test_the_model_still_fits_the_4060():
        model = build_model()
        assert_fits(model, torch.randn(1, 3, 224, 224), device="rtx-4060", batch=32,
                    precision="bf16", margin=0.1)

The model is estimated as `trainfit.estimate` estimates it (a meta copy of the live module,
traced without weights: no GPU, no weights in memory); the assertion fails with one paragraph
naming the memory needed and the memory usable. A spec-file guard for CI is `trainfit check`
(`trainfit.specfile.check`, docs/ci.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
from torch import nn

from trainfit.errors import SpecError
from trainfit.estimator.result import Estimate
from trainfit.estimator.step import estimate
from trainfit.hardware.units import GIB
from trainfit.models.live import UserBatch, registered
from trainfit.spec import OptimizerKind, Precision, TrainSpec, parse_enum


def assert_fits(
    model: nn.Module | str,
    sample: UserBatch | None = None,
    *,
    device: str = "h100",
    batch: int | None = None,
    precision: Precision | str = Precision.FP32,
    optimizer: OptimizerKind | str = OptimizerKind.ADAMW,
    checkpointing: bool = False,
    margin: float = 0.0,
    seq_len: int | None = None,
    loss_fn: Callable[..., torch.Tensor] | None = None,
    step_fn: Callable[[nn.Module, Any], torch.Tensor] | None = None,
) -> Estimate:
    """Fail (AssertionError) unless one training step of `model` fits `device` at `batch`,
    keeping `margin` (a fraction) of its memory free; return the estimate when it does.

    `model` is a live module with `sample` (a tensor, a tuple whose last item is the target,
    or a dict of tensors; batch dimension first; `batch` defaults to its rows), or a name that
    `trainfit estimate` takes (catalog name, HF model directory, `pkg.module:factory`) with
    `sample` None. `loss_fn` / `step_fn` are as in `trainfit.autofit`. A bad argument is a
    TrainfitError, not an assertion failure.
    """
    if not 0.0 <= margin < 1.0:
        raise SpecError([f"margin must be a fraction in [0, 1), got {margin}"])
    fields: dict[str, Any] = dict(
        device=device,
        precision=parse_enum(Precision, "precision", precision),
        optimizer=parse_enum(OptimizerKind, "optimizer", optimizer),
        checkpointing=checkpointing,
        seq_len=seq_len,
    )
    if isinstance(model, str):
        if sample is not None or loss_fn is not None or step_fn is not None:
            raise SpecError(
                ["a model given by name takes no sample, loss_fn or step_fn: pass the module"]
            )
        result = estimate(TrainSpec(model=model, batch=batch or 1, **fields))
    elif isinstance(model, nn.Module):
        if sample is None:
            raise SpecError(["assert_fits needs a sample batch with a live module"])
        with registered(model, sample, loss_fn, step_fn) as live:
            spec = TrainSpec(
                model=live.model_path,
                step_fn=live.step_path,
                inputs=live.inputs,
                batch=batch or live.sample_rows,
                **fields,
            )
            result = estimate(spec)
    else:
        raise SpecError([f"model is a {type(model).__name__}: give an nn.Module or a model name"])
    name = model if isinstance(model, str) else type(model).__name__
    message = _short(result, margin, name)
    if message is not None:
        raise AssertionError(message)
    return result


def _short(result: Estimate, margin: float, name: str) -> str | None:
    """The failure's paragraph, or None when the step fits inside the margin."""
    device = result.device
    spec = result.spec
    needed = result.device_memory_needed_bytes
    what = (
        f"one training step of {name} at batch {spec.batch} "
        f"({spec.precision.value}, {spec.optimizer.value}"
        f"{', checkpointing' if spec.checkpointing else ''})"
    )
    if not device.memory_bytes:
        return (
            f"{what} needs {needed / GIB:.2f} GiB, but the memory of {device.display} is "
            "unknown, so trainfit cannot say whether it fits."
        )
    usable = (1.0 - margin) * device.memory_bytes
    if needed <= usable:
        return None
    usable_text = (
        f"{usable / GIB:.2f} GiB of the device's {device.memory_bytes / GIB:.2f} GiB is usable "
        f"(keeping {margin:.0%} free)"
        if margin
        else f"the device has {usable / GIB:.2f} GiB"
    )
    largest = max(asdict(result.breakdown).items(), key=lambda item: item[1])
    return (
        f"{what} does not fit {device.display}: it needs {needed / GIB:.2f} GiB of device "
        f"memory, and {usable_text}: {needed / usable:.0%} of it. The largest part is "
        f"{largest[0].replace('_', ' ')}: {largest[1] / GIB:.2f} GiB. A smaller batch, "
        "checkpointing=True, precision='bf16' or optimizer='adamw-8bit' may fit; "
        "`trainfit plan` lists the settings that do."
    )
