"""Loop-timed steps (`window.py`) against trainfit's predictions, with the run-to-run noise.

    PYTHONPATH=src:. python -m benchmarks.steptime.compare_window RESULTS.json --set blind \
        > results/blind_h100.md
    PYTHONPATH=src:. python -m benchmarks.steptime.compare_window \
        results/calibration_window_h100.json --set heldout > results/calibration_window_h100.md

Per case: each run's median window (its step time), their median (the truth), the prediction's
error against it, and the run-to-run spread (max / min - 1 over the runs), the noise the error
is to be read beside; the synced steps of the same processes (`measure_gpu.py`'s method)
beside them. `--set blind`, `--set blind2` and `--set blind3` read the predictions committed
before the runs (`results/blind_predictions.json`, `results/blind2_predictions.json`,
`results/blind3_predictions.json`), never recomputed ones. `--set heldout` shows both the
predictions committed before these cases' first runs (`results/heldout_predictions.json`, the
model before) and the current model's, recomputed:
the host floor was refitted on these rows, so that column is a fit, not a check. `--now` adds
the same column to a blind set (rules chosen having seen its runs: a recomputation, not a
check).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import case_set
from benchmarks.steptime.predict import PREDICTION_FILES, predict


def loop_runs(record: dict[str, Any], key: str = "window_median_seconds") -> dict[str, list[float]]:
    """case -> each run's `key` (failed runs left out)."""
    runs: dict[str, list[float]] = {}
    for run in record["runs"]:
        if run.get(key):
            runs.setdefault(run["case"], []).append(run[key])
    return runs


def _summary(errors: list[float], spreads: list[float]) -> str:
    a, s = sorted(abs(e) for e in errors), sorted(spreads)
    return (
        f"median |error| {statistics.median(a):.1%}, worst {a[-1]:.1%}, within 7%: "
        f"{sum(x <= 0.07 for x in a)} of {len(a)}, within 20%: {sum(x <= 0.2 for x in a)}; "
        f"run-to-run spread median {statistics.median(s):.1%}, worst {s[-1]:.1%}"
    )


def _header(record: dict[str, Any], predictions: dict[str, Any]) -> None:
    env, settings = record["environment"], record["settings"]
    print(
        f"Measured {env['date'][:10]} on {env['device']} (`{env['nvidia_smi']}`; host CPU "
        f"{env.get('cpu')}), torch {env['torch']} (CUDA {env['cuda']}, cuDNN {env['cudnn']}), "
        f"transformers {env['transformers']}, peft {env['peft']}, Python {env['python']}; "
        "each case in a fresh process per run (`benchmarks/steptime/window.py`): "
        f"{settings['warmup']} synced warm-up steps, {settings['synced']} more timed synced "
        f"(the old method, shown beside), then {settings['windows']} + 1 windows of N steps "
        f"(about {settings['window_ms']:.0f} ms each) with no sync between them, CUDA events "
        "between windows, the first dropped; a run's step time is its median window over N, "
        "the truth the median over the runs"
        + (
            f"; every {settings['pin_every']}nd run pinned to CPUs {settings['pin']}"
            if settings.get("pin_every")
            else ""
        )
        + ".\n"
    )
    if record.get("protocol"):
        print(f"Protocol: {record['protocol']}.\n")
    v = predictions["versions"]
    print(
        f"Predictions committed {predictions['predicted'][:10]} (rules at "
        f"{predictions['rules_at'][:10]}; trainfit {v['trainfit']}, torch {v['torch']}, "
        f"transformers {v['transformers']}), device {predictions['device']}.\n"
    )


def previous_rules(blind_set: str) -> dict[str, float]:
    """case -> the rules before's predicted seconds (`results/<set>_previous_rules.json`), or
    nothing where the set has no such file."""
    path = PREDICTION_FILES[blind_set].with_name(f"{blind_set}_previous_rules.json")
    if not path.exists():
        return {}
    return {n: c["step_seconds"] for n, c in json.loads(path.read_text())["cases"].items()}


def host_reference_table(record: dict[str, Any]) -> list[str]:
    """Per round (and call) the host reference (`window.host_reference`) before and after each
    case: the host's microseconds per tiny CUDA dispatch, the CPU clock; empty where the runs
    have none."""
    rows = [r for r in record["runs"] if "host_reference_before" in r]
    if not rows:
        return []
    out = [
        "\n## Host reference per run (`window.host_reference`)\n",
        "The host's microseconds per `x.add_(1)` on a one-element CUDA tensor (median of 3 loops "
        "of 20000, no sync), before and after each case in its process; the CPU's mean clock "
        "from `/proc/cpuinfo`.\n",
        "| call | round | runs | dispatch us before (median; min-max) | after (median; min-max) "
        "| after / before (min-max) | CPU MHz |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r.get("call", 1), r["repeat"]), []).append(r)
    for (call, rnd), runs in sorted(groups.items()):
        b = [r["host_reference_before"]["dispatch_median_us"] for r in runs]
        a = [r["host_reference_after"]["dispatch_median_us"] for r in runs]
        ratio = [y / x for x, y in zip(b, a, strict=True)]
        mhz = sorted({r["host_reference_before"]["cpu_mhz_mean"] for r in runs})
        out.append(
            f"| {call} | {rnd} | {len(runs)} | {statistics.median(b):.2f}; {min(b):.2f}-"
            f"{max(b):.2f} | {statistics.median(a):.2f}; {min(a):.2f}-{max(a):.2f} | "
            f"{min(ratio):.2f}-{max(ratio):.2f} | {', '.join(f'{m:.0f}' for m in mhz)} |"
        )
    every = [
        r[k]["dispatch_median_us"]
        for r in rows
        for k in ("host_reference_before", "host_reference_after")
    ]
    out.append(
        f"\nAll {len(every)} readings: median {statistics.median(every):.2f} us, "
        f"{min(every):.2f}-{max(every):.2f} (max / min - 1 = {max(every) / min(every) - 1:.0%})."
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path)
    parser.add_argument("--set", default="blind", choices=tuple(PREDICTION_FILES))
    parser.add_argument(
        "--now",
        action="store_true",
        help="add the model's figures today (rules chosen after these runs were seen)",
    )
    args = parser.parse_args()
    record = json.loads(args.results.read_text())
    committed = json.loads(PREDICTION_FILES[args.set].read_text())
    windows, synced = loop_runs(record), loop_runs(record, "synced_median_seconds")
    cases = case_set(args.set)
    seen = args.set == "heldout" or args.now
    now = {name: predict(name, cases)["step_seconds"] for name in windows} if seen else {}
    title = "Calibration" if args.set == "heldout" else "Blind"
    print(f"# {title} step times timed as a loop runs them: the H100 against trainfit\n")
    _header(record, committed)
    errors, refit, spreads, lines = [], [], [], []
    before = previous_rules(args.set) if args.set != "heldout" else {}
    old_errors: list[float] = []
    for name, runs in windows.items():
        truth = statistics.median(runs)
        predicted = committed["cases"][name]["step_seconds"]
        errors.append(predicted / truth - 1)
        spreads.append(max(runs) / min(runs) - 1)
        s = synced.get(name, [])
        cells = [
            name,
            ", ".join(f"{x * 1e3:.2f}" for x in runs),
            f"{truth * 1e3:.2f}",
            f"{spreads[-1]:.1%}",
            f"{statistics.median(s) * 1e3:.2f} ({max(s) / min(s) - 1:.0%})" if s else "-",
            f"{predicted * 1e3:.2f}",
            f"{errors[-1]:+.1%}",
        ]
        if before:
            old_errors.append(before[name] / truth - 1)
            cells += [f"{before[name] * 1e3:.2f}", f"{old_errors[-1]:+.1%}"]
        if now:
            refit.append(now[name] / truth - 1)
            cells += [f"{now[name] * 1e3:.2f}", f"{refit[-1]:+.1%}"]
        cells.append(f"{committed['cases'][name]['host_bound_share']:.0%}")
        lines.append("| " + " | ".join(cells) + " |")
    print(f"**{len(errors)} cases, committed predictions: {_summary(errors, spreads)}.**\n")
    if before:
        print(f"The rules before, same runs: {_summary(old_errors, spreads)}.\n")
    if now:
        why = "fitted on these rows" if args.set == "heldout" else "rules chosen having seen them"
        print(f"**The model now ({why}): {_summary(refit, spreads)}.**\n")
    head = (
        "| case | step ms (runs) | measured ms | run spread | synced ms (spread) "
        "| predicted ms | error |"
    )
    if before:
        head += " rules before ms | error before |"
    if now:
        head += " model now ms | error now |"
    print(head + " host-bound (pred) |")
    print("|---" * (head.count("|")) + "|")
    print("\n".join(lines))
    if "host_reference_before" in record["runs"][0]:
        print("\n".join(host_reference_table(record)))


if __name__ == "__main__":
    main()
