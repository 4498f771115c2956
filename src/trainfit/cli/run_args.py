"""Command-line options for a run's size and prices (`estimate --time`, `plan`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from trainfit.errors import SpecError
from trainfit.timing.run import (
    DEFAULT_HOURS_PER_YEAR,
    DEFAULT_KWH_PRICE,
    DEFAULT_YEARS,
    MAX_EPOCHS,
)

if TYPE_CHECKING:
    from trainfit.estimator.step import Estimate
    from trainfit.spec import TrainSpec
    from trainfit.timing.run import RunSpec, Stage
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


def run_spec(args: argparse.Namespace) -> RunSpec:
    """The RunSpec the options describe (SpecError lists every bad value)."""
    overrides: dict[str, float] = {}
    problems = []
    for item in args.price:
        name, _, value = item.partition("=")
        try:
            overrides[name.strip()] = float(value)
        except ValueError:
            problems.append(
                f"--price {item!r}: expected INSTANCE=USD_PER_HOUR, e.g. aws-g5.xlarge=1.0"
            )
    if problems:
        raise SpecError(problems)
    from trainfit.timing.run import RunSpec

    return RunSpec(
        samples=args.samples,
        tokens=args.tokens,
        epochs=args.epochs,
        eval_fraction=args.eval_fraction,
        gpus=args.gpus,
        kwh_price=args.kwh_price,
        currency=args.currency.upper(),
        usd_rate=args.fx,
        years=args.years,
        hours_per_year=args.hours_per_year,
        watts=args.watts,
        deadline_hours=args.deadline,
        price_overrides=overrides,
    )


def stages(items: list[str], spec: TrainSpec) -> list[tuple[str, float, TrainSpec]]:
    """`--stage EPOCHS[:PATTERN,...]` items as (name, epochs, the stage's spec)."""
    import dataclasses

    out = []
    problems = []
    for number, item in enumerate(items, 1):
        epochs_text, _, patterns = item.partition(":")
        try:
            epochs = float(epochs_text)
        except ValueError:
            problems.append(
                f"--stage {item!r}: expected EPOCHS[:PATTERN,...], e.g. --stage '5:backbone.*'"
            )
            continue
        if not 0 < epochs <= MAX_EPOCHS:
            problems.append(
                f"--stage {item!r}: epochs must be positive and at most {MAX_EPOCHS:g}, "
                f"got {epochs_text}"
            )
            continue
        freeze = tuple(p for p in patterns.split(",") if p) if patterns else spec.freeze
        name = f"stage {number}" + (f" (frozen {', '.join(freeze)})" if freeze else "")
        out.append((name, epochs, dataclasses.replace(spec, freeze=freeze)))
    if problems:
        raise SpecError(problems)
    return out


def measured(args: argparse.Namespace, default_device: str) -> tuple[float, str] | None:
    """`--measured-step` and `--measured-on` (default `default_device`), checked."""
    import math

    if args.measured_step is None:
        if args.measured_on:
            raise SpecError(["--measured-on needs --measured-step SECONDS"])
        return None
    if not 0 < args.measured_step < math.inf:
        raise SpecError(
            [f"--measured-step must be a positive number of seconds, got {args.measured_step}"]
        )
    return args.measured_step, args.measured_on or default_device


def check_sized(run: RunSpec, args: argparse.Namespace) -> None:
    """Options that only mean something with a data size must come with one; --epochs and
    --stage exclude each other."""
    loose = [
        flag
        for flag, given in (
            ("--deadline", args.deadline is not None),
            ("--stage", bool(getattr(args, "stage", []))),
            ("--eval-fraction", args.eval_fraction != 0.0),
            ("--price", bool(args.price)),
            # NB: `trainfit plan` plans a multi-GPU run from --gpus without a data size
            ("--gpus", args.gpus != 1 and not hasattr(args, "strategy")),
            ("--watts", args.watts is not None),
            ("--fx", args.fx is not None),
            ("--currency", args.currency.upper() != "USD"),
            ("--kwh-price", args.kwh_price != DEFAULT_KWH_PRICE),
            ("--epochs", args.epochs != 1.0),
        )
        if given
    ]
    if loose and not run.sized:
        raise SpecError(
            [f"{', '.join(loose)} need the data size: give --samples or --tokens per epoch"]
        )
    if getattr(args, "stage", []) and args.epochs != 1.0:
        raise SpecError(["give --epochs or --stage, not both: the stages set the epochs"])


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
