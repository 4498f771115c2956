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
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from trainfit.cli.interrupt import (
    forget_unhandled_interrupt,
    interrupt_requested,
    interrupts_raised,
    report_interrupt,
)
from trainfit.errors import SpecFileError, TrainfitError

COMMANDS: dict[str, str] = {
    "estimate": "trainfit.cli.estimate:run",
    "plan": "trainfit.cli.plan:run",
    "models": "trainfit.cli.models:run",
    "devices": "trainfit.cli.devices:run",
    "measure": "trainfit.cli.measure:run",
    "measure-data": "trainfit.cli.measure_data:run",
    "doctor": "trainfit.cli.doctor:run",
    "detect": "trainfit.cli.detect:run",
    "check": "trainfit.cli.check:run",
}
"""Each subcommand, in the help's order, and the function that runs it; its module, imported
only when the command is given (or the whole help is asked for), registers its flags
(`add_parser`)."""

DEFAULT_EXAMPLE = ["estimate", "gpt2", "--batch", "8", "--seq", "512", "--precision", "bf16"]


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command` alone (its module the only one imported), or of every command
    (None or an unknown name: the usage error lists them)."""
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
    for name in [command] if command in COMMANDS else COMMANDS:
        _module(name).add_parser(sub)
    return parser


def _module(command: str) -> ModuleType:
    return importlib.import_module(COMMANDS[command].partition(":")[0])


def _function(command: str) -> Callable[[argparse.Namespace], int]:
    return getattr(_module(command), COMMANDS[command].partition(":")[2])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # NB: Ctrl-C while the parser is built (its subcommands import torch) is an interrupt
        # like any other: exit 130, one line
        with interrupts_raised():
            argv = argv or DEFAULT_EXAMPLE
            parser = _parser(argv[0])
            if argv[:1] == ["plan"] and any(
                a == "--batch" or a.startswith("--batch=") for a in argv
            ):
                parser.exit(2, f"trainfit plan: error: {_module('plan').BATCH_HINT}\n")
            args = parser.parse_args(argv)
            return _run(args, argv)
    except KeyboardInterrupt:
        return report_interrupt()
    except Exception as exc:
        if interrupt_requested():  # NB: a library interrupted mid-way fails in its own way
            return report_interrupt()
        if isinstance(exc, SpecFileError):  # a spec file's problems: one a line
            from trainfit.cli import spec_file

            spec_file.print_error(exc)
            return 1
        if isinstance(exc, TrainfitError):
            print(f"trainfit: error: {exc}", file=sys.stderr)
            return 1
        raise


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    """The command of `args`; its errors are the caller's."""
    if args.command == "plan":
        # `trainfit plan spec.yaml` plans each of the spec file's models
        from trainfit.cli import spec_file

        if spec_file.is_spec_file(args.model):
            return spec_file.run(args, argv, lambda: _parser("plan"))
    return _function(args.command)(args)


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
        # among them) must run, so the interpreter exits the ordinary way, with `code` even
        # where a measurement caught Ctrl-C
        forget_unhandled_interrupt()
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # NB: a closed pipe (`trainfit ... | head`); nothing left to say
        code = code or 1
    os._exit(code)


if __name__ == "__main__":
    entry()
