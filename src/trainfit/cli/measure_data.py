"""`trainfit measure-data pkg.module:make_loader`: the samples per second of the user's own data
loader on this machine, to give to `--data-rate`."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `measure-data` subcommand."""
    parser = sub.add_parser(
        "measure-data",
        help="time your own DataLoader on this machine (samples/s for --data-rate)",
        description="Calls FACTORY (package.module:make_loader, no arguments) and times "
        "--batches batches of the loader it returns, after a first batch timed apart "
        "(worker start-up). Example: trainfit measure-data mypkg.data:train_loader --batches 100",
    )
    parser.add_argument(
        "factory", metavar="FACTORY", help="package.module:function returning a loader"
    )
    parser.add_argument(
        "--batches", type=int, default=50, help="batches to time after the first (default 50)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    from trainfit.measure.data import measure_data

    progress = None
    if not args.json and sys.stderr.isatty():
        from rich.progress import Progress

        progress = Progress(transient=True)
    if progress is None:
        rate = measure_data(args.factory, args.batches)
    else:
        with progress:
            task = progress.add_task("timing the data loader", total=args.batches + 1)
            rate = measure_data(
                args.factory, args.batches, lambda i, n, s: progress.update(task, completed=i + 1)
            )
    if args.json:
        print(
            json.dumps(
                {
                    "samples_per_second": round(rate.samples_per_second, 3),
                    "batches": rate.batches,
                    "samples": rate.samples,
                    "seconds": round(rate.seconds, 4),
                    "first_batch_seconds": round(rate.first_batch_seconds, 4),
                }
            )
        )
        return 0
    print(
        f"{rate.samples_per_second:,.1f} samples/s over {rate.batches} batches "
        f"({rate.samples} samples in {rate.seconds:.2f} s); first batch after "
        f"{rate.first_batch_seconds:.2f} s (worker start-up, not counted)\n"
        f"give it to estimate or plan: --data-rate {_rounded(rate.samples_per_second)}"
    )
    return 0


def _rounded(rate: float) -> str:
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"
