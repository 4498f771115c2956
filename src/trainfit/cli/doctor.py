"""`trainfit doctor`: does this machine's training stack work (torch, CUDA, driver, MPS, NCCL,
a tiny real training step), and how to fix what does not. Exit code 1 when a check failed."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NB: the command imports torch only once it runs (see cli.main.entry)
    from trainfit.hardware.probe import Probe


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `doctor` subcommand."""
    parser = sub.add_parser(
        "doctor",
        help="check torch, CUDA, driver, MPS, bf16/tf32 and NCCL and run a tiny training step",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--no-step", action="store_true", help="skip the tiny real training step on each device"
    )


def run(args: argparse.Namespace, probe: Probe | None = None) -> int:
    """Diagnose and print; returns 1 when a check failed (warnings do not), else 0.

    `probe` replaces the real one (tests).
    """
    from trainfit.measure.doctor import diagnose

    diagnosis = diagnose(probe, run_steps=not args.no_step)
    if args.json:
        from trainfit.report.doctor import diagnosis_dict

        print(json.dumps(diagnosis_dict(diagnosis), indent=2))
    else:
        from rich.console import Console

        from trainfit.report.doctor import doctor_renderable

        Console().print(doctor_renderable(diagnosis))
    return 0 if diagnosis.ok else 1
