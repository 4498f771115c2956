"""Command-line options for a run's size and prices (`estimate --time`, `plan`); the values are
read by `trainfit.specfile.checks`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from trainfit.errors import SpecError
from trainfit.timing.run import DEFAULT_HOURS_PER_YEAR, DEFAULT_KWH_PRICE, DEFAULT_YEARS

if TYPE_CHECKING:
    from trainfit.estimator.step import Estimate
    from trainfit.spec import TrainSpec
    from trainfit.timing.run import Stage
    from trainfit.timing.step import StepTime


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run options (each is a RunSpec field)."""
    group = parser.add_argument_group("run size and cost")
    group.add_argument("--samples", type=int, default=None, help="training samples per epoch")
    group.add_argument("--tokens", type=int, default=None, help="training tokens per epoch")
    group.add_argument("--epochs", type=float, default=1.0, help="epochs (default 1)")
    group.add_argument(
        "--eval-fraction",
        type=float,
        default=0.0,
        help="evaluation samples per epoch as a fraction of the training samples",
    )
    group.add_argument("--gpus", type=int, default=1, help="GPUs of the device (data parallel)")
    group.add_argument(
        "--kwh-price",
        type=float,
        default=DEFAULT_KWH_PRICE,
        help=f"electricity price per kWh in USD (default {DEFAULT_KWH_PRICE})",
    )
    group.add_argument("--watts", type=float, default=None, help="power the local machine draws")
    group.add_argument("--currency", default="USD", help="currency of the costs shown")
    group.add_argument("--fx", type=float, default=None, help="units of --currency per USD")
    group.add_argument(
        "--years", type=float, default=DEFAULT_YEARS, help="years a local device is used"
    )
    group.add_argument(
        "--hours-per-year",
        type=float,
        default=DEFAULT_HOURS_PER_YEAR,
        help="hours a year a local device trains (spreads its price)",
    )
    group.add_argument("--deadline", type=float, default=None, help="hours the run must fit in")
    group.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="INSTANCE=USD_PER_HOUR",
        help="replace an instance's on-demand price (repeatable)",
    )


def stage_times(
    items: list[tuple[str, float, TrainSpec]],
    result: Estimate,
    reference: tuple[float, StepTime, str] | None = None,
) -> list[Stage]:
    """Each stage's step time and gradient bytes (a stage freezing what `result` froze reuses
    its step); `reference` (seconds measured, the modelled step they were measured against,
    the device) scales every stage's modelled step as it scaled `result`'s."""
    from trainfit.estimator.step import estimate
    from trainfit.timing.run import Stage
    from trainfit.timing.step import scaled

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
    import dataclasses

    from trainfit.estimator.step import estimate
    from trainfit.hardware.catalog import get_device
    from trainfit.timing.step import scaled

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
