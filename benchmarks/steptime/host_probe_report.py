"""Do the host probes (`host_probe.py`) track the step time of host-bound cases?

    PYTHONPATH=src:. python -m benchmarks.steptime.host_probe_report \
        results/host_probe_h100_call1.json results/host_probe_h100_call2.json \
        > results/host_probe_h100.md

Reads two or more calls of `host_probe.py`, each on its own machine, and the predictions
committed for the set (`results/<set>_predictions.json`, with each case's host-bound share).
A run's probe value is the median of its readings before and after its case; a machine's, the
median over every reading of its call. Host-bound cases: a predicted host-bound share of 0.5 or
more. Prints, as Markdown:
1. per machine, each probe's median (and its spread over the call's runs);
2. per case, each machine's step time (median over runs) and run-to-run spread;
3. per probe, how its ratio between the machines tracks the host-bound cases' step ratio
   (residual after scaling by it, beside the best single factor), and how a run's probe
   deviation tracks its step deviation (Pearson r over runs, within each machine and pooled);
4. post hoc (NOT a blind result): the committed predictions' errors with their host-bound share
   scaled by probe / reference, the reference fitted on the other machine(s).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
RATES = ("memcpy_gbps", "h2d_gbps")  # higher is faster: used inverted, as a time


def _time_like(name: str, value: float) -> float:
    return 1 / value if name in RATES else value


def run_probes(run: dict[str, Any]) -> dict[str, float]:
    """probe -> the run's median reading (before and after its case), as a time."""
    out = {}
    for name, before in run["probes_before"].items():
        readings = before + run.get("probes_after", {}).get(name, [])
        out[name] = _time_like(name, statistics.median(readings))
    return out


def machine(path: Path) -> dict[str, Any]:
    record = json.loads(path.read_text())
    runs = [r for r in record["runs"] if "window_median_seconds" in r]
    readings: dict[str, list[float]] = {}
    for row in runs + record["probe_only"]:
        for name, values in row["probes_before"].items():
            readings.setdefault(name, []).extend(values + row.get("probes_after", {}).get(name, []))
    steps: dict[str, list[float]] = {}
    for run in runs:
        steps.setdefault(run["case"], []).append(run["window_median_seconds"])
        run["probe"] = run_probes(run)
    return {
        "name": path.stem.removeprefix("host_probe_"),
        "date": record["environment"]["date"],
        "probe": {n: _time_like(n, statistics.median(v)) for n, v in readings.items()},
        "probe_raw": {n: statistics.median(v) for n, v in readings.items()},
        "run_probe_spread": {
            n: max(r["probe"][n] for r in runs) / min(r["probe"][n] for r in runs) - 1
            for n in readings
        },
        "steps": steps,
        "step": {c: statistics.median(v) for c, v in steps.items()},
        "runs": runs,
    }


def _pearson(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


def _med_worst(values: list[float]) -> str:
    a = sorted(abs(v) for v in values)
    return f"{statistics.median(a):.1%} / {a[-1]:.1%}" if a else "-"


def print_machines(machines: list[dict[str, Any]]) -> None:
    print("## Probes per machine (median of every reading; run-to-run spread of a run's median)\n")
    print("| probe | " + " | ".join(m["name"] for m in machines) + " | ratio last / first |")
    print("|---|" + "---:|" * (len(machines) + 1))
    for name in machines[0]["probe"]:
        cells = [
            f"{m['probe_raw'][name]:.2f} (±{m['run_probe_spread'][name]:.0%})" for m in machines
        ]
        ratio = machines[-1]["probe"][name] / machines[0]["probe"][name]
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio:.3f} |")
    print()


def print_steps(machines: list[dict[str, Any]], shares: dict[str, float]) -> None:
    print("## Step time per case (ms, median over runs; runs; spread max/min - 1)\n")
    print("| case | host share | " + " | ".join(m["name"] for m in machines) + " | ratio |")
    print("|---|---:|" + "---:|" * (len(machines) + 1))
    for case, share in shares.items():
        cells = []
        for m in machines:
            runs = m["steps"].get(case, [])
            spread = max(runs) / min(runs) - 1 if runs else 0
            cells.append(f"{m['step'][case] * 1e3:.2f} (n={len(runs)}, {spread:.0%})")
        ratio = machines[-1]["step"][case] / machines[0]["step"][case]
        print(f"| {case} | {share:.2f} | " + " | ".join(cells) + f" | {ratio:.3f} |")
    print()


def _run_deviations(machines: list[dict[str, Any]], cases: list[str], name: str, pooled: bool):
    """(probe log-deviation, step log-deviation) of each run of `cases`: from its machine's
    medians, or with `pooled` from the medians over every machine's runs."""
    groups = [machines] if pooled else [[m] for m in machines]
    xs: list[float] = []
    ys: list[float] = []
    for group in groups:
        runs = [r for m in group for r in m["runs"] if r["case"] in cases]
        probe_mid = statistics.median(r["probe"][name] for r in runs)
        for run in runs:
            step_mid = statistics.median(
                r["window_median_seconds"] for r in runs if r["case"] == run["case"]
            )
            xs.append(math.log(run["probe"][name] / probe_mid))
            ys.append(math.log(run["window_median_seconds"] / step_mid))
    return xs, ys


def print_tracking(machines: list[dict[str, Any]], cases: list[str]) -> None:
    first, last = machines[0], machines[-1]
    ratios = [last["step"][c] / first["step"][c] for c in cases]
    best = statistics.median(ratios)
    print(f"## Does a probe track the host-bound step ({len(cases)} cases, share >= 0.5)?\n")
    print(
        f"Between machines: step ratio {last['name']} / {first['name']} per case, median "
        f"{best:.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); |ratio - 1| unscaled "
        f"{_med_worst([r - 1 for r in ratios])}; after the best single factor "
        f"{_med_worst([r / best - 1 for r in ratios])}. Within: Pearson r of a run's probe "
        "deviation against its step deviation (log, from its case's median), host-bound runs; "
        "spread: per case max/min - 1 of the runs of every machine pooled, raw and divided by "
        "the run's own probe (median / worst over cases).\n"
    )
    print(
        "| probe | probe ratio | residual after scaling, median / worst | r within "
        + " / ".join(m["name"] for m in machines)
        + " | r pooled | slope pooled | pooled spread raw | pooled spread / probe |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in first["probe"]:
        q = last["probe"][name] / first["probe"][name]
        within = [_pearson(*_run_deviations([m], cases, name, False)) for m in machines]
        xs, ys = _run_deviations(machines, cases, name, True)
        slope = sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
        raw, scaled = _pooled_spreads(machines, cases, name)
        print(
            f"| {name} | {q:.3f} | {_med_worst([r / q - 1 for r in ratios])} | "
            + " / ".join(f"{r:+.2f}" for r in within)
            + f" | {_pearson(xs, ys):+.2f} | {slope:+.2f} | {raw} | {scaled} |"
        )
    print()


def _pooled_spreads(machines: list[dict[str, Any]], cases: list[str], name: str) -> tuple[str, str]:
    raw, scaled = [], []
    for case in cases:
        runs = [r for m in machines for r in m["runs"] if r["case"] == case]
        steps = [r["window_median_seconds"] for r in runs]
        per = [r["window_median_seconds"] / r["probe"][name] for r in runs]
        raw.append(max(steps) / min(steps) - 1)
        scaled.append(max(per) / min(per) - 1)
    return _med_worst(raw), _med_worst(scaled)


def print_consistency(machines: list[dict[str, Any]]) -> None:
    print("## Is a probe steady within one process?\n")
    print(
        "A run's probe read just before its case is built and again about 10 s later, after it "
        "is timed: Pearson r of the two (log of each block's median) over the call's runs, and "
        "the median |after / before - 1|. The step's drift by round: median over the round's "
        "runs of step / its case's median on that machine.\n"
    )
    print("| probe | " + " | ".join(f"{m['name']} r / median change" for m in machines) + " |")
    print("|---|" + "---:|" * len(machines))
    for name in machines[0]["probe"]:
        cells = []
        for m in machines:
            before = [math.log(statistics.median(r["probes_before"][name])) for r in m["runs"]]
            after = [math.log(statistics.median(r["probes_after"][name])) for r in m["runs"]]
            pairs = zip(after, before, strict=True)
            change = statistics.median(abs(math.exp(a - b) - 1) for a, b in pairs)
            cells.append(f"{_pearson(before, after):+.2f} / {change:.0%}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    for m in machines:
        rounds: dict[int, list[float]] = {}
        for run in m["runs"]:
            ratio = run["window_median_seconds"] / m["step"][run["case"]]
            rounds.setdefault(run["repeat"], []).append(ratio)
        drift = ", ".join(
            f"round {k} x{statistics.median(v):.3f} ({len(v)} runs)" for k, v in rounds.items()
        )
        print(f"- {m['name']}: {drift}")
    print()


def print_prefix(machines: list[dict[str, Any]], counts: tuple[int, ...] = (1, 3, 6, 13)) -> None:
    """The machine ratio from only the first k runs' before-blocks (k x reads readings, k x
    about 12 s of a call) against the ratio from every reading."""
    first, last = machines[0], machines[-1]
    print("## How many readings does the machine ratio need?\n")
    print(
        f"Probe ratio {last['name']} / {first['name']} from the median of the before-blocks of "
        "each call's first k runs only (k runs = k x 5 readings taken over about k x 12 s), "
        "beside the ratio over every reading (the tracking table's).\n"
    )
    print("| probe | " + " | ".join(f"k = {k}" for k in counts) + " | all |")
    print("|---|" + "---:|" * (len(counts) + 1))
    for name in first["probe"]:

        def head(m: dict[str, Any], k: int, name: str = name) -> float:
            values = [v for r in m["runs"][:k] for v in r["probes_before"][name]]
            return _time_like(name, statistics.median(values))

        cells = [f"{head(last, k) / head(first, k):.3f}" for k in counts]
        print(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {last['probe'][name] / first['probe'][name]:.3f} |"
        )
    print()


def _errors(m: dict[str, Any], preds: dict[str, Any], name: str | None, ref: float) -> list[float]:
    out = []
    for case, pred in preds.items():
        share = pred["host_bound_share"]
        factor = 1.0 if name is None else (1 - share) + share * m["probe"][name] / ref
        out.append(pred["step_seconds"] * factor / m["step"][case] - 1)
    return out


def _fit_ref(others: list[dict[str, Any]], preds: dict[str, Any], name: str) -> float:
    """The reference probe value minimising the median |error| over `others` (grid search)."""
    mid = statistics.median(m["probe"][name] for m in others)
    grid = [mid * 2 ** (k / 40) for k in range(-60, 61)]

    def cost(ref: float) -> float:
        return statistics.median(abs(e) for m in others for e in _errors(m, preds, name, ref))

    return min(grid, key=cost)


def print_posthoc(machines: list[dict[str, Any]], preds: dict[str, Any]) -> None:
    print("## POST HOC, not a blind result: predictions scaled by a probe\n")
    print(
        "Each case's committed prediction with its host-bound share h scaled by the machine's "
        "probe over a reference: P x ((1 - h) + h x probe / ref). The reference is fitted "
        "(median |error|) on the other machine(s) and applied to this one, so it is a "
        "cross-machine check of a rule made after seeing these data, never a blind error. "
        "Median / worst |error| over all 13 cases.\n"
    )
    print("| scaling | " + " | ".join(m["name"] for m in machines) + " |")
    print("|---|" + "---:|" * len(machines))
    cells = [_med_worst(_errors(m, preds, None, 1.0)) for m in machines]
    print("| none (the committed predictions) | " + " | ".join(cells) + " |")
    for name in machines[0]["probe"]:
        cells = []
        for m in machines:
            others = [o for o in machines if o is not m]
            ref = _fit_ref(others, preds, name)
            cells.append(f"{_med_worst(_errors(m, preds, name, ref))} (ref {ref:.3g})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("calls", nargs="+", type=Path)
    parser.add_argument("--set", default="blind6")
    args = parser.parse_args()
    machines = [machine(p) for p in args.calls]
    preds = json.loads((RESULTS / f"{args.set}_predictions.json").read_text())["cases"]
    shares = {c: p["host_bound_share"] for c, p in preds.items()}
    host_bound = [c for c, s in shares.items() if s >= 0.5]
    print(
        f"# Host probes against host-bound steps ({args.set}; "
        + ", ".join(f"{m['name']} {m['date']}" for m in machines)
        + ")\n"
    )
    print_machines(machines)
    print_steps(machines, shares)
    print_tracking(machines, host_bound)
    print_consistency(machines)
    print_prefix(machines)
    print_posthoc(machines, preds)


if __name__ == "__main__":
    main()
