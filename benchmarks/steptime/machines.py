"""A blind set against the median of the H100 machines it ran on (2026-11-27).

    PYTHONPATH=src:. python -m benchmarks.steptime.machines --set blind6 \
        > benchmarks/steptime/results/blind6_four_machines.md
    PYTHONPATH=src:. python -m benchmarks.steptime.machines --set blind7 \
        > benchmarks/steptime/results/blind7_two_machines.md
    PYTHONPATH=src:. python -m benchmarks.steptime.machines --set blind7-3 \
        > benchmarks/steptime/results/blind7_three_machines.md

Each machine's step time of a case is the median of its runs there (`compare_window.loop_runs`);
the truth here is the median over the machines, the error the committed prediction's (committed
before any of the runs) against it, and the spread the slowest machine over the fastest. A
summary across machines, not a further measurement. Where the set has predictions by the rules
before its study too, their errors follow, and each machine's own errors under both.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.steptime.compare_window import loop_runs

RESULTS = Path(__file__).parent / "results"
SETS: dict[str, dict[str, str]] = {
    "blind6": {
        "A (08:20Z)": "blind6_h100.json",
        "B (08:46Z)": "blind6_h100_machine2.json",
        "C (09:17Z)": "host_probe_h100_call1.json",
        "D (09:24Z)": "host_probe_h100_call2.json",
    },
    "blind7": {
        "1 (11:36Z)": "blind7_raw/machine1.json",
        "2 (11:43Z)": "blind7_raw/machine2.json",
    },
    "blind7-3": {
        "1 (11:36Z)": "blind7_raw/machine1.json",
        "2 (11:43Z)": "blind7_raw/machine2.json",
        "3 (12:12Z, one run)": "blind7_raw/machine3.json",
    },
}
"""The machines of each table: `blind7-3` is the seventh set with its third machine (one run a
case), beside `blind7`, the table of its first two (whose median the tolerance test reads)."""
WITH_PREVIOUS = ("blind7",)
"""The sets whose table sets the previous rules' predictions beside the committed ones (the
sixth set's has its committed predictions only, as it was first written)."""
TITLES = {"blind6": "sixth", "blind7": "seventh"}
COUNTS = {2: "two", 3: "three", 4: "four"}


def _summary(errors: list[float]) -> str:
    size = sorted(abs(e) for e in errors)
    return (
        f"{len(errors)} cases: median |error| {statistics.median(size):.1%}, worst "
        f"{size[-1]:.1%}; within 7%: {sum(e <= 0.07 for e in size)}, within 20%: "
        f"{sum(e <= 0.2 for e in size)}"
    )


def machine_medians(name: str) -> dict[str, dict[str, float]]:
    """Each machine's median run of each case of table `name` (a key of `SETS`, seconds), by
    machine."""
    return {
        machine: {case: statistics.median(runs) for case, runs in loop_runs(record).items()}
        for machine, file in SETS[name].items()
        for record in [json.loads((RESULTS / file).read_text())]
    }


def truths(name: str) -> dict[str, float]:
    """Each case of table `name` that ran: the median over the machines of each machine's
    median run (seconds), the truth its prediction is compared with."""
    medians = machine_medians(name).values()
    cases = dict.fromkeys(case for own in medians for case in own)
    return {c: statistics.median(own[c] for own in medians if c in own) for c in cases}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=tuple(SETS), default="blind6")
    chosen = parser.parse_args().set
    machines, name = SETS[chosen], chosen.split("-")[0]
    committed = json.loads((RESULTS / f"{name}_predictions.json").read_text())["cases"]
    before = RESULTS / f"{name}_previous_rules.json"
    previous = json.loads(before.read_text())["cases"] if name in WITH_PREVIOUS else None
    medians = machine_medians(chosen)
    truth_of = truths(chosen)
    names = list(machines)
    print(
        f"# The {TITLES[name]} blind set against the median of {COUNTS[len(names)]} H100 machines\n"
    )
    print(
        f"Committed predictions (`results/{name}_predictions.json`) against the median over "
        "the machines of each machine's median run (ms); spread: slowest machine over fastest.\n"
    )
    extra = " | previous rules | their error" if previous else ""
    print(f"| case | {' | '.join(names)} | median | spread | predicted | error{extra} |")
    print("|---|" + "---:|" * (len(names) + 4 + (2 if previous else 0)))
    errors, olds = [], []
    for case, predicted in committed.items():
        seen = [medians[m][case] for m in names if case in medians[m]]
        truth = truth_of[case]
        errors.append(predicted["step_seconds"] / truth - 1)
        cells = [f"{medians[m][case] * 1e3:.2f}" if case in medians[m] else "-" for m in names]
        row = (
            f"| {case} | {' | '.join(cells)} | {truth * 1e3:.2f} | {max(seen) / min(seen) - 1:.0%}"
            f" | {predicted['step_seconds'] * 1e3:.2f} | {errors[-1]:+.1%}"
        )
        if previous:
            olds.append(previous[case]["step_seconds"] / truth - 1)
            row += f" | {previous[case]['step_seconds'] * 1e3:.2f} | {olds[-1]:+.1%}"
        print(row + " |")
    print(f"\n**{_summary(errors)}.**")
    if previous:
        print(f"\nThe previous rules' predictions against the same median: {_summary(olds)}.\n")
        print("Each machine alone (the median of its runs), with the run-to-run spread there:\n")
        for machine in names:
            own = medians[machine]
            runs = loop_runs(json.loads((RESULTS / machines[machine]).read_text()))
            spreads = [max(r) / min(r) - 1 for r in runs.values() if len(r) > 1]
            spread = f"{statistics.median(spreads):.0%}" if spreads else "none (one run a case)"
            new = [committed[c]["step_seconds"] / own[c] - 1 for c in own]
            old = [previous[c]["step_seconds"] / own[c] - 1 for c in own]
            print(
                f"- {machine}: this rule {_summary(new)}; the previous rules {_summary(old)}; "
                f"run-to-run spread median {spread}."
            )


if __name__ == "__main__":
    main()
