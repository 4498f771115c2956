"""`trainfit estimate`: its flags, by group, and the command."""

from __future__ import annotations

import argparse
import json
import sys

from trainfit.cli import help as helps
from trainfit.cli import run_args, spec_args
from trainfit.errors import SpecError

DOES_NOT_FIT = 3
"""`trainfit estimate`'s exit code when the step does not fit the device (the estimate is
printed, the run is neither priced nor recommended); 1 is an error, 2 a usage error."""

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


def run(args: argparse.Namespace) -> int:
    """Estimate one training step of the spec `args` give, with the catalogs they name."""
    from trainfit.hardware.catalog import using_catalogs

    with using_catalogs(args.catalog):
        return _estimate(args)


def _estimate(args: argparse.Namespace) -> int:
    from trainfit.cli.progress import shown, status
    from trainfit.estimator.stages import calibrated, stage_times
    from trainfit.estimator.step import estimate

    spec = spec_args.spec(args)
    if args.margin and not args.max_batch:
        raise SpecError(
            [
                f"--margin {args.margin:g} applies to --max-batch only (the fraction of memory "
                "kept free while searching): add --max-batch, or plan with a margin "
                "(trainfit plan MODEL --effective-batch N --margin F)"
            ]
        )
    show = shown(args.json)
    if args.max_batch:
        from trainfit.estimator.scaling import max_micro_batch

        with status(show):
            found = max_micro_batch(spec, margin=args.margin)
        if args.json:
            print(json.dumps(found.to_dict(), indent=2))
        else:
            from trainfit.report.terminal import max_batch_text

            print(max_batch_text(found))
        return 0 if found.batch else DOES_NOT_FIT
    from trainfit.specfile import checks

    run = checks.run_spec(args)
    checks.check_sized(run, args, gpus_need_size=True)
    measured = checks.measured(args.measured_step, args.measured_on, args.device)
    # NB: a data size, a measured step or stages ask for the time without --time
    args.time = args.time or run.sized or measured is not None
    stage_specs = checks.stages(args.stage, spec)
    with status(show):
        result = estimate(spec)
    reference = None
    if measured is not None:
        result, reference = calibrated(result, *measured)
    totals = None
    if run.sized and result.step_time is not None and result.fits is not False:
        from trainfit.timing.run import estimate_run

        stages = stage_times(stage_specs, result, reference)
        totals = estimate_run(result, run, stages)
    if args.json:
        from trainfit.report.estimate import estimate_dict

        out = estimate_dict(result)
        if totals is not None:
            from trainfit.plan.cost_words import run_dict

            out["run"] = run_dict(totals)
        print(json.dumps(out, indent=2))
    else:
        from rich.console import Console

        from trainfit.report.terminal import estimate_renderable, time_renderable

        console = Console()
        console.print(estimate_renderable(result))
        if args.time:
            console.print(time_renderable(result, totals))
    if result.fits is False:
        from trainfit.report.terminal import does_not_fit_text

        print(does_not_fit_text(result, priced=run.sized), file=sys.stderr)
        return DOES_NOT_FIT
    return 0
