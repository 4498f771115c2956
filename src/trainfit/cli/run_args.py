"""Command-line options for a run's size and prices (`estimate --time`, `plan`); the values are
read by `trainfit.specfile.checks`."""

from __future__ import annotations

import argparse

from trainfit.cli import help as helps
from trainfit.timing.run import DEFAULT_HOURS_PER_YEAR, DEFAULT_KWH_PRICE, DEFAULT_YEARS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run options (each is a RunSpec field)."""
    group = helps.group(parser, helps.TIME)
    group.add_argument("--samples", type=int, default=None, help="training samples per epoch")
    group.add_argument("--tokens", type=int, default=None, help="training tokens per epoch")
    group.add_argument("--epochs", type=float, default=1.0, help="epochs (default 1)")
    group.add_argument(
        "--eval-fraction",
        type=float,
        default=0.0,
        help="evaluation samples per epoch as a fraction of the training samples",
    )
    group.add_argument(
        "--data-rate",
        type=float,
        default=None,
        metavar="SAMPLES_PER_S",
        help="samples per second your data loader delivers, per process (measure it with "
        "`trainfit measure-data`); a step takes at least its batch at this rate",
    )
    group.add_argument("--gpus", type=int, default=1, help="GPUs of the device (data parallel)")
    group.add_argument(
        "--kwh-price",
        type=float,
        default=DEFAULT_KWH_PRICE,
        help="electricity price per kWh in USD",
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
