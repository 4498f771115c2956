"""`trainfit check SPEC.yaml [--baseline FILE] [--update-baseline] [--tolerance FRACTION]`:
a memory guard for CI (`trainfit.specfile.check`); exit code 1 when a check fails.

One line per model x device, then a verdict line; with --update-baseline the baseline file is
written (atomically) from this run, and the exit code says whether every model fits.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from trainfit.errors import SpecError
from trainfit.hardware.units import gib

if TYPE_CHECKING:
    from trainfit.specfile.baseline import Footprint
    from trainfit.specfile.check import CheckResult, DeviceCheck


def add_parser(sub: argparse._SubParsersAction) -> None:
    from trainfit.specfile.check import DEFAULT_TOLERANCE

    parser = sub.add_parser(
        "check",
        help="CI memory guard: every model of a spec file fits its devices, and grew no more "
        "than a tolerance over a committed baseline (exit 1 otherwise)",
        description="Plan each model of SPEC.yaml on each of its devices, as `trainfit plan` "
        "does (writing nothing), and fail when one does not fit or needs more device memory "
        "than the baseline allows. See docs/ci.md.",
        epilog="examples:\n"
        "  trainfit check ci/memory.yaml --baseline ci/memory.json --update-baseline\n"
        "  trainfit check ci/memory.yaml --baseline ci/memory.json --tolerance 0.05",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("spec", metavar="SPEC.yaml", help="a plan spec file (docs/spec-file.md)")
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        default=None,
        help="the committed baseline JSON to compare with (default: none, fits only)",
    )
    parser.add_argument(
        "--update-baseline",
        action="store_true",
        help="write --baseline FILE from this run instead of comparing with it",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        metavar="FRACTION",
        help=f"growth allowed over the baseline (default: {DEFAULT_TOLERANCE}, i.e. "
        f"{DEFAULT_TOLERANCE * 100:.0f}%%)",
    )


def run(args: argparse.Namespace) -> int:
    from trainfit.cli.progress import shown, status
    from trainfit.specfile.baseline import read_baseline
    from trainfit.specfile.check import (
        BASELINE_OUTCOMES,
        check_plan_file,
        check_tolerance,
        save_baseline,
    )
    from trainfit.specfile.loader import load_plan_spec

    check_tolerance(args.tolerance)
    if args.update_baseline and not args.baseline:
        raise SpecError(["--update-baseline needs --baseline FILE (where to write it)"])
    baseline = None
    if args.baseline and not args.update_baseline:
        baseline = read_baseline(args.baseline)  # NB: before planning, which takes seconds
    plan_file = load_plan_spec(args.spec)
    with status(shown()):
        result = check_plan_file(plan_file, baseline=baseline, tolerance=args.tolerance)
    for line in result_lines(result):
        print(line)
    if args.update_baseline:
        save_baseline(result, args.baseline)
        print(f"wrote {args.baseline} ({len(result.footprints())} model x device figures)")
    elif any(c.outcome in BASELINE_OUTCOMES for c in result.failed):
        print(_how_to_update(args))
    return 0 if result.passed else 1


def result_lines(result: CheckResult) -> list[str]:
    """The check in words: a header, one line per model x device, a verdict."""
    against = (
        f"baseline {result.baseline} (tolerance {result.tolerance:.1%})"
        if result.baseline is not None
        else "no baseline (fits only)"
    )
    pairs = f"{len(result.checks)} model x device pairs"
    lines = [f"trainfit check {result.source}: {pairs}, {against}"]
    lines += [
        f"  {'ok  ' if c.passed else 'FAIL'}  {_line(c, result.tolerance)}" for c in result.checks
    ]
    for package, before, now in result.versions_changed:
        lines.append(f"  note: the baseline was computed with {package} {before}, this run {now}")
    failed = len(result.failed)
    lines.append(
        "passed" if not failed else f"FAILED: {failed} of {len(result.checks)} checks failed"
    )
    return lines


def _line(check: DeviceCheck, tolerance: float) -> str:
    from trainfit.specfile.check import Outcome

    where = f"{check.model} on {check.device}"
    usable = "unknown" if check.usable_bytes is None else gib(check.usable_bytes)
    now, before = check.now, check.baseline
    if check.outcome is Outcome.NOT_ESTIMATED:
        return f"{where}: not estimated (the catalog has no memory size for {check.display})"
    if check.outcome is Outcome.DOES_NOT_FIT or now is None:
        return f"{where}: does not fit one {check.display} ({usable} usable); see trainfit plan"
    text = f"{where}: {gib(now.needed_bytes)} of {usable} usable, {_setting(now)}"
    if check.outcome is Outcome.NOT_IN_BASELINE:
        return f"{text}; not in the baseline"
    if before is None:
        return text
    if check.outcome is Outcome.SETTING_CHANGED:
        return f"{text}; the baseline planned {_setting(before)} ({gib(before.needed_bytes)})"
    change = f"{check.growth:+.1%} on the baseline's {gib(before.needed_bytes)}"
    if check.outcome is Outcome.GREW:
        return f"{text}; grew {change}, over the {tolerance:.1%} allowed"
    if check.outcome is Outcome.SHRANK:
        return f"{text}; shrank {change} (update the baseline to keep the gain)"
    return f"{text}; {change}"


def _setting(footprint: Footprint) -> str:
    parts = [footprint.precision.value, footprint.optimizer.value]
    if footprint.checkpointing:
        parts.append("checkpointing")
    parts.append(f"micro-batch {footprint.micro_batch} x {footprint.grad_accum}")
    return ", ".join(parts)


def _how_to_update(args: argparse.Namespace) -> str:
    baseline = args.baseline or "FILE"
    return (
        "if the change is intended: trainfit check "
        f"{args.spec} --baseline {baseline} --update-baseline, and commit {baseline}"
    )
