"""The flags of `trainfit estimate`, by group (the command itself: `trainfit.cli.main`)."""

from __future__ import annotations

import argparse

from trainfit.cli import help as helps
from trainfit.cli import run_args, spec_args

EXAMPLES = (
    "trainfit estimate tinyllama-1.1b --batch 4 --seq 1024 --precision bf16 --device h100",
    "trainfit estimate gpt2 --seq 512 --precision bf16 --device rtx-4060 --max-batch",
    "trainfit estimate gpt2 --batch 8 --seq 512 --precision bf16 --time --tokens 100000000",
    "trainfit estimate qwen2-0.5b --batch 2 --seq 2048 --precision bf16 --checkpointing --json",
    "trainfit estimate trainfit.models.zoo:emotion_mlp --batch 32 --device cpu",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `estimate` subcommand."""
    parser = helps.command_parser(
        sub,
        "estimate",
        "memory one training step needs on a target device",
        (helps.MODEL, helps.BATCH, helps.PRECISION, helps.DEVICE, helps.TIME, helps.OUTPUT),
        EXAMPLES,
        arguments="[MODEL] [options]",
    )
    parser.description += (
        " Exit codes: 0 the step fits (or the device has no verdict), 1 an error, 2 a usage "
        "error, 3 the step does not fit the device (the estimate is printed; with --samples or "
        "--tokens the run is not priced; with --max-batch not even one sample fits)."
    )
    helps.group(parser, helps.MODEL).add_argument(
        "model",
        nargs="?",
        default="gpt2",
        help="catalog name, HF model directory or hub id, or pkg.module:factory",
    )
    spec_args.add_arguments(parser)
    batch = helps.group(parser, helps.BATCH)
    batch.add_argument(
        "--max-batch",
        action="store_true",
        help="find the largest micro-batch that fits the device instead (--batch is ignored)",
    )
    batch.add_argument(
        "--margin",
        type=float,
        default=0.0,
        help="with --max-batch: fraction of the device's memory to keep free (e.g. 0.1)",
    )
    device = helps.group(parser, helps.DEVICE)
    device.add_argument("--device", default="h100", help="target device (trainfit devices)")
    device.add_argument(
        "--catalog", action="append", default=[], metavar="PATH", help="a user device catalog file"
    )
    time = helps.group(parser, helps.TIME)
    time.add_argument(
        "--time",
        action="store_true",
        help="show the step time (and, with --samples or --tokens, the run's hours and cost)",
    )
    run_args.add_arguments(parser)
    time.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="EPOCHS[:PATTERN,...]",
        help="a stage of the run: its epochs and the parameters frozen in it (repeatable; "
        "e.g. --stage '5:backbone.*' --stage 50); replaces --epochs",
    )
    time.add_argument(
        "--measured-step",
        type=float,
        default=None,
        help="seconds per optimizer step you measured for this spec (see --measured-on)",
    )
    time.add_argument(
        "--measured-on",
        default=None,
        help="the device --measured-step was measured on (default: --device)",
    )
    helps.group(parser, helps.OUTPUT).add_argument(
        "--json", action="store_true", help="print JSON instead of a table"
    )
