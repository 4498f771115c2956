"""`trainfit detect`: what this machine has (GPUs, MPS, CPU, RAM), matched to the catalog."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `detect` subcommand."""
    parser = sub.add_parser("detect", help="this machine's GPUs, MPS, CPU and RAM")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """Detect and print; returns the exit code."""
    from trainfit.hardware.detect import detect_local

    machine = detect_local()
    if args.json:
        from trainfit.report.local import local_machine_dict

        print(json.dumps(local_machine_dict(machine), indent=2))
    else:
        from rich.console import Console

        from trainfit.report.local import local_machine_renderable

        Console().print(local_machine_renderable(machine))
    return 0
