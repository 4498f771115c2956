"""The `trainfit` command: a thin layer over the public API.

trainfit                      estimate the default example (gpt2, batch 8, seq 512, bf16, h100)
trainfit estimate MODEL ...   estimate one training step (exit code 3: it does not fit)
trainfit plan MODEL --effective-batch N [--device D ...]   settings that fit each device
trainfit plan SPEC.yaml [--option ...]   the same from a plan spec file (docs/spec-file.md)
trainfit models | devices     list the catalogs
trainfit detect [--json]      this machine's GPUs, MPS, CPU and RAM, matched to the catalog
trainfit measure MODEL ...    real steps on this machine beside the estimate; --max-batch, --latency
trainfit doctor [--json]      versions, drivers, GPUs, bf16/tf32/NCCL, a tiny real step; each fix
trainfit check SPEC.yaml [--baseline FILE]   CI memory guard: fits, and no growth over a baseline
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Sequence

from trainfit.cli import check, detect, devices, doctor, measure, measure_data, spec_args
from trainfit.cli import estimate as estimate_command
from trainfit.cli import plan as plan_command
from trainfit.cli.interrupt import interrupts_raised
from trainfit.errors import SpecError, SpecFileError, TrainfitError
from trainfit.hardware.catalog import using_catalogs

DOES_NOT_FIT = 3
"""`trainfit estimate`'s exit code when the step does not fit the device (the estimate is
printed, the run is neither priced nor recommended); 1 is an error, 2 a usage error."""

DEFAULT_EXAMPLE = ["estimate", "gpt2", "--batch", "8", "--seq", "512", "--precision", "bf16"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainfit",
        description="Will this training job fit on this device, and with which settings?",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  trainfit                          # gpt2, batch 8, seq 512, bf16 on an h100\n"
        "  trainfit estimate tinyllama-1.1b --batch 4 --seq 1024 --precision bf16\n"
        "  trainfit plan llama-3.1-8b --effective-batch 32 --seq 2048 --device a100-40gb\n"
        "  trainfit COMMAND --help           # each command's flags, by group",
    )
    sub = parser.add_subparsers(dest="command")
    estimate_command.add_parser(sub)
    plan_command.add_parser(sub)
    sub.add_parser("models", help="list the built-in model catalog")
    devices.add_parser(sub)
    measure.add_parser(sub)
    measure_data.add_parser(sub)
    doctor.add_parser(sub)
    detect.add_parser(sub)
    check.add_parser(sub)
    return parser


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
            out["run"] = totals.to_dict()
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


def _models() -> int:
    from rich.console import Console

    from trainfit.models.catalog import catalog
    from trainfit.report.tables import FitTable

    table = FitTable(title="model catalog")
    for column in ("name", "family", "task", "source"):
        table.add_column(column)
    for row in catalog().values():
        table.add_row(row.name, row.family, row.task, row.source)
    Console().print(table)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # NB: Ctrl-C while the parser is built (its subcommands import torch) is an interrupt
        # like any other: exit 130, one line
        with interrupts_raised():
            parser = _parser()
            if argv[:1] == ["plan"] and any(
                a == "--batch" or a.startswith("--batch=") for a in argv
            ):
                parser.exit(2, f"trainfit plan: error: {plan_command.BATCH_HINT}\n")
            args = parser.parse_args(argv or DEFAULT_EXAMPLE)
            return _run(args, argv)
    except SpecFileError as exc:  # a spec file's problems: one a line
        from trainfit.cli import spec_file

        spec_file.print_error(exc)
        return 1
    except TrainfitError as exc:
        print(f"trainfit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("trainfit: interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    """The command of `args`; its errors are the caller's."""
    if args.command == "plan":
        # `trainfit plan spec.yaml` plans each of the spec file's models
        from trainfit.cli import spec_file

        if spec_file.is_spec_file(args.model):
            return spec_file.run(args, argv, _parser)
        return plan_command.run(args)
    if args.command == "models":
        return _models()
    if args.command == "devices":
        return devices.run(args)
    if args.command == "detect":
        return detect.run(args)
    if args.command == "measure":
        return measure.run(args)
    if args.command == "doctor":
        return doctor.run(args)
    if args.command == "measure-data":
        return measure_data.run(args)
    if args.command == "check":
        return check.run(args)
    with using_catalogs(args.catalog):
        return _estimate(args)


def entry() -> None:
    """The `trainfit` command as a process: `main()` with the process set up for one run.

    Python's cyclic garbage collector is off for the run: importing torch and transformers
    creates about a million objects, and the collections they trigger cost half a second of the
    CLI's five: it is off for speed only (a trace pauses the collector itself, and a finished
    trace no longer changes when it runs: `Recorder.finish`), and one run is short. On the way
    out the process skips the interpreter's teardown of those modules (another 0.7 s): output
    is flushed first and files were written and closed by the command. After a plan that used a
    worker process, the exit is the ordinary one, so that multiprocessing cleans up after itself.
    """
    gc.disable()
    code = main()
    if "concurrent.futures.process" in sys.modules:
        # NB: a plan's worker pool ran: multiprocessing's exit handlers (its resource tracker
        # among them) must run, so the interpreter exits the ordinary way
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # NB: a closed pipe (`trainfit ... | head`); nothing left to say
        code = code or 1
    os._exit(code)


if __name__ == "__main__":
    entry()
