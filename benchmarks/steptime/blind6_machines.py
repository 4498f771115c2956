"""The sixth blind set against the median of the four H100 machines it ran on (2026-11-27).

    PYTHONPATH=src:. python -m benchmarks.steptime.blind6_machines \
        > benchmarks/steptime/results/blind6_four_machines.md

Each machine's step time of a case is the median of its runs there (`compare_window.loop_runs`);
the truth here is the median over the machines, the error the committed prediction's
(`results/blind6_predictions.json`, committed before any of the runs) against it, and the
spread the slowest machine over the fastest. A summary across machines, not a fifth
measurement: the machines' own tables are `blind6_h100.md`, `blind6_h100_machine2.md` and
`host_probe_h100.md`.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from benchmarks.steptime.compare_window import loop_runs

RESULTS = Path(__file__).parent / "results"
MACHINES = {
    "A (08:20Z)": "blind6_h100.json",
    "B (08:46Z)": "blind6_h100_machine2.json",
    "C (09:17Z)": "host_probe_h100_call1.json",
    "D (09:24Z)": "host_probe_h100_call2.json",
}


def main() -> None:
    committed = json.loads((RESULTS / "blind6_predictions.json").read_text())["cases"]
    medians = {
        name: {case: statistics.median(runs) for case, runs in loop_runs(record).items()}
        for name, file in MACHINES.items()
        for record in [json.loads((RESULTS / file).read_text())]
    }
    print("# The sixth blind set against the median of four H100 machines\n")
    print(
        "Committed predictions (`results/blind6_predictions.json`) against the median over "
        "the machines of each machine's median run (ms); spread: slowest machine over fastest.\n"
    )
    names = list(MACHINES)
    print(f"| case | {' | '.join(names)} | median | spread | predicted | error |")
    print("|---|" + "---:|" * (len(names) + 4))
    errors = []
    for case, predicted in committed.items():
        seen = [medians[m][case] for m in names if case in medians[m]]
        truth = statistics.median(seen)
        errors.append(predicted["step_seconds"] / truth - 1)
        cells = [f"{medians[m][case] * 1e3:.2f}" if case in medians[m] else "-" for m in names]
        print(
            f"| {case} | {' | '.join(cells)} | {truth * 1e3:.2f} | {max(seen) / min(seen) - 1:.0%}"
            f" | {predicted['step_seconds'] * 1e3:.2f} | {errors[-1]:+.1%} |"
        )
    size = sorted(abs(e) for e in errors)
    print(
        f"\n**{len(errors)} cases: median |error| {statistics.median(size):.1%}, worst "
        f"{size[-1]:.1%}; within 7%: {sum(e <= 0.07 for e in size)}, within 20%: "
        f"{sum(e <= 0.2 for e in size)}.**"
    )


if __name__ == "__main__":
    main()
