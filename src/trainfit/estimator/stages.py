"""An estimate's run over stages, and its step calibrated by a measured one (`trainfit
estimate --time --stage ... --measured-step ...`)."""

from __future__ import annotations

import dataclasses

from trainfit.errors import SpecError
from trainfit.estimator.step import Estimate, estimate
from trainfit.hardware.catalog import get_device
from trainfit.spec import TrainSpec
from trainfit.timing.run import Stage
from trainfit.timing.step import StepTime, scaled


def stage_times(
    items: list[tuple[str, float, TrainSpec]],
    result: Estimate,
    reference: tuple[float, StepTime, str] | None = None,
) -> list[Stage]:
    """Each stage's step time and gradient bytes (a stage freezing what `result` froze reuses
    its step); `reference` (seconds measured, the modelled step they were measured against,
    the device) scales every stage's modelled step as it scaled `result`'s."""
    out = []
    for name, epochs, spec in items:
        if spec == result.spec:
            step, trainable = result.step_time, result.trainable_parameter_count
        else:
            other = estimate(spec)
            step, trainable = other.step_time, other.trainable_parameter_count
            if step is not None and reference is not None:
                seconds, modelled, on = reference
                step = scaled(step, modelled, seconds, on)
        if step is None:
            raise SpecError([f"{name}: no step time on {result.device.display}"])
        grads = trainable * spec.precision.param_dtype.itemsize
        out.append(Stage(name=name, epochs=epochs, step=step, gradient_bytes=grads))
    return out


def calibrated(
    result: Estimate, seconds: float, on: str
) -> tuple[Estimate, tuple[float, StepTime, str]]:
    """`result` with its step time scaled by a step measured on `on`, and the reference the
    scaling used (for other stages)."""
    if result.step_time is None:
        raise SpecError([f"no modelled step time on {result.device.display} to calibrate"])
    reference_device = get_device(on)
    if reference_device.name == result.device.name:
        reference = result.step_time
    else:
        other = estimate(dataclasses.replace(result.spec, device=reference_device.name))
        if other.step_time is None:
            raise SpecError([f"no modelled step time on {reference_device.display} to scale from"])
        reference = other.step_time
    step = scaled(result.step_time, reference, seconds, reference_device.display)
    return (
        dataclasses.replace(result, step_time=step),
        (seconds, reference, reference_device.display),
    )
