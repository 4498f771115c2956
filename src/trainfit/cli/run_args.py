"""Command-line options for a run's size and prices (`estimate --time`, `plan`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from trainfit.errors import SpecError
from trainfit.timing.run import DEFAULT_HOURS_PER_YEAR, DEFAULT_KWH_PRICE, DEFAULT_YEARS

if TYPE_CHECKING:
    from trainfit.timing.run import RunSpec


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
    group.add_argument("--fx", type=float, default=1.0, help="units of --currency per USD")
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
