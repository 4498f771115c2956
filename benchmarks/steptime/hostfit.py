"""Fit the step-time model's host floor (`src/trainfit/timing/host_fit.json`) on committed steps.

    PYTHONPATH=src:. python -m benchmarks.steptime.hostfit [--write]

The single-op microbenchmarks (`benchmarks/timing/calibrate.py`) set what one op costs the
host in isolation; whole steps cost more (autograd's node creation, hooks, the loop's Python).
The host floor's constants (`trainfit.timing.constants.HostFit`) are fitted here by coordinate
descent over a grid (five rounds at most, from the microbenchmarks' values and from the shipped
fit, the better kept), minimising the mean over the three tables below of each table's mean
|log(predicted / measured)|, on the calibration rows only:

- `benchmarks/timing/results/timing_h100.json`: the accuracy suite's 36 steps;
- `benchmarks/faithful/results/faithful_h100.json`: the steps built as users build them (median
  of the two runs), less `distilbert-seqcls-bf16` (traced with another head);
- `results/calibration_window_h100.json`: the twelve steps of `cases.py` (held out from the
  first fit, so calibration now) timed as a loop runs them (`window.py`), compared with the
  model's steady period; the rows above were timed with a sync after each step and are
  compared with the model's synced step (`step_time(..., synced_loop=True)`);
- with `--prefill` only: `benchmarks/inference/results/raw_h100/gen_*.json`, the prefill of six
  greedy generations (no-grad forwards, which the training tables barely weigh), compared
  with the traced prefill's forward. Tried after the blind check of `results/blind_h100.md`
  (the shipped fit, without them, puts a no-grad op at 12 us and prefill 24% over); not
  shipped: the README says what it trades.

The held-out tables (`timing_heldout_h100`, `rnn_heldout_h100`, `dtype_heldout_h100`) are not
read. Device kernel times are the calibration's; only the host constants move.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainfit.hardware.catalog import Device, get_device
from trainfit.spec import LoraSpec, Precision, TrainSpec
from trainfit.timing.constants import Calibration, calibration
from trainfit.timing.step import step_time
from trainfit.trace.costs import StepCosts
from trainfit.trace.generation import trace_generation
from trainfit.trace.step import trace_step
from trainfit.trace.target import Target

BENCH = Path(__file__).resolve().parents[1]
OUT = BENCH.parent / "src/trainfit/timing/host_fit.json"
US = 1e-6
GRID: dict[str, list[float]] = {
    "op_seconds": [x * US for x in (2, 4, 6, 8, 10, 12, 14)],
    "graph_op_seconds": [x * US for x in (12, 14, 16, 18, 20, 22, 25, 28, 32, 36)],
    "backward_op_seconds": [x * US for x in (8, 10, 12, 14, 16, 18, 20, 24)],
    "module_seconds": [x * US for x in (0, 1.5, 3, 5, 8, 12, 16)],
    "view_seconds": [x * US for x in (0.5, 1, 3, 5, 8, 11, 14, 18)],
    "backward_view_seconds": [x * US for x in (1, 3, 5, 8, 11, 14, 18, 22)],
    "step_seconds": [x * US for x in (0, 50, 100, 200, 300, 400, 600, 800)],
    "pass_seconds": [x * US for x in (0, 25, 50, 100, 200, 300)],
    "rnn_call_seconds": [x * US for x in (0, 50, 100, 200, 300, 400, 500, 600, 800)],
    "library_scale": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25],
    "optimizer_scale": [0.8, 1.0, 1.2, 1.4, 1.6, 2.0, 2.5],
}
START = {  # the microbenchmarks' values, no fixed costs
    "op_seconds": 14 * US,
    "graph_op_seconds": 14 * US,
    "backward_op_seconds": 13.4 * US,
    "module_seconds": 2.9 * US,
    "view_seconds": 14 * US,
    "backward_view_seconds": 14 * US,
    "step_seconds": 0.0,
    "pass_seconds": 0.0,
    "rnn_call_seconds": 0.0,
    "library_scale": 1.0,
    "optimizer_scale": 1.0,
}
RESULTS = Path(__file__).parent / "results"
WINDOW = RESULTS / "calibration_window_h100.json"
DIAGNOSE = RESULTS / "diagnose_h100/diagnose_host.json"
RECENT = ("blind8", "blind9", "blind10", "blind11", "blind12", "blind13")
"""The blind sets timed on one machine each by `window.py` (`results/<set>_raw/machine1.json`)."""
LOOP_TIMED = (
    "steptime",
    "blind",
    "blind2",
    "blind3",
    "blind4",
    "blind5",
    "blind6",
    "diagnose",
    *RECENT,
)
"""The tables timed as a loop runs them (compared with the steady period); the others were
timed with a sync after each step."""


def faithful_spec(name: str) -> dict[str, Any] | None:
    """The TrainSpec keyword arguments of a faithful case as the run built it (None: skipped)."""
    from benchmarks.faithful.compare import SPECS

    if name == "distilbert-seqcls-bf16":
        return None
    kwargs = dict(SPECS[name][0])
    if "lora" in kwargs:
        kwargs["lora"] = LoraSpec(**kwargs["lora"])
        kwargs["weights_dtype"] = "auto" if "bf16base" in name else "fp32"
    if name == "lora-qwen2-0.5b-fp32base":
        kwargs["use_cache"] = True
    if name == "dpo-qwen2-0.5b-bf16ref":
        kwargs["reference_dtype"] = "bf16"
    if name == "gpt2-default-cache-bf16":
        kwargs["use_cache"] = True
    return kwargs


def window_rows(
    path: Path = WINDOW, table: str = "steptime", cases: str = "heldout"
) -> dict[str, tuple[dict[str, Any], float]]:
    """name -> (TrainSpec keyword arguments, measured seconds) of the steps timed as a loop
    runs them (`window.py`; by default `results/calibration_window_h100.json`): the median
    over the runs of each run's median window."""
    from benchmarks.steptime.cases import case_set
    from benchmarks.steptime.predict import spec_kwargs

    runs: dict[str, list[float]] = {}
    for run in json.loads(path.read_text())["runs"]:
        if "window_median_seconds" in run:
            runs.setdefault(run["case"], []).append(run["window_median_seconds"])
    return {
        f"{table}/{name}": (spec_kwargs(name, case_set(cases)), statistics.median(seconds))
        for name, seconds in runs.items()
    }


def diagnose_rows() -> dict[str, tuple[dict[str, Any], float]]:
    """name -> (TrainSpec keyword arguments, measured seconds) of the host-bound steps of
    `results/diagnose_h100/diagnose_host.json` (`diagnose.py`: tiny MLPs and an elementwise
    chain, batch 16, four optimizers, loops of 200 steps with a sync at each end): the median
    over the runs of the full step (forward, backward, the optimizer, zero_grad)."""
    from benchmarks.steptime.diagnose import FACTORIES, OPTIMIZERS

    runs: dict[tuple[str, str], list[float]] = {}
    for run in json.loads(DIAGNOSE.read_text())["runs"]:
        if run["part"] != "host":  # the first call's RNN part failed (its error kept)
            continue
        for row in run["rows"]:
            for short in OPTIMIZERS:
                runs.setdefault((row["model"], short), []).append(row[f"{short}_full_us"] * US)
    out = {}
    for (model, short), seconds in runs.items():
        kwargs = dict(
            model=f"benchmarks.steptime.diagnose:{FACTORIES[model]}",
            inputs=("x=B,32",),
            batch=16,
            optimizer=OPTIMIZERS[short],
            precision="bf16" if model.endswith("-bf16") else "fp32",
        )
        out[f"diagnose/{model}-{short}"] = (kwargs, statistics.median(seconds))
    return out


def optimizer_lines() -> dict[str, tuple[float, float]]:
    """Optimizer kind (`host_timed_as`) -> (fixed, per tensor) host seconds of
    `optimizer.step()`: a least-squares line over `diagnose.py`'s steps timed alone (the
    gradients kept; 6 to 34 tensors), each point the median over the runs. Adam and AdamW
    are pooled (both are timed as AdamW)."""
    kinds = {"sgd": "sgd", "sgdm": "sgd-momentum", "adam": "adamw", "adamw": "adamw"}
    runs: dict[tuple[str, str], list[float]] = {}
    tensors: dict[str, int] = {}
    for run in json.loads(DIAGNOSE.read_text())["runs"]:
        if run["part"] != "host":
            continue
        for row in run["rows"]:
            tensors[row["model"]] = row["tensors"]
            for short in kinds:
                runs.setdefault((short, row["model"]), []).append(row[f"{short}_step_us"] * US)
    points: dict[str, list[tuple[int, float]]] = {}
    for (short, model), seconds in runs.items():
        points.setdefault(kinds[short], []).append((tensors[model], statistics.median(seconds)))
    lines = {}
    for kind, xy in points.items():
        slope, intercept = statistics.linear_regression([x for x, _ in xy], [y for _, y in xy])
        lines[kind] = (intercept, slope)
    return lines


def check_rows() -> dict[str, tuple[dict[str, Any], float]]:
    """The rows `--eval` reports beside the calibration rows and the fit does not read
    (unless `--with-blind`): `benchmarks/timing`'s held-out steps (synced) and the blind
    steps of `results/blind_h100.json` (loop-timed), and the later blind sets' tables
    (`blind2`-`blind6`) where measured."""
    from benchmarks.timing.heldout import HELDOUT

    measured = json.loads((BENCH / "timing/results/timing_heldout_h100.json").read_text())
    rows = {
        f"heldout/{name}": (dict(HELDOUT[name]), record["median_step_seconds"])
        for name, record in measured["cases"].items()
    }
    rows |= window_rows(RESULTS / "blind_h100.json", "blind", "blind")
    for name in ("blind2", "blind3", "blind4", "blind5"):
        if (RESULTS / f"{name}_h100.json").exists():
            rows |= window_rows(RESULTS / f"{name}_h100.json", name, name)
    # NB: the sixth set's every run, on its first two machines (`machines.py --set blind6`
    # compares it with the median over four)
    rows |= window_rows(RESULTS / "blind6_h100_all.json", "blind6", "blind6")
    for name in RECENT:
        rows |= window_rows(RESULTS / f"{name}_raw/machine1.json", name, name)
    return rows


def prefill_rows(device: Device) -> list[tuple[str, TrainSpec, StepCosts, float]]:
    """(name, spec, the traced prefill, measured seconds) of each committed generation's
    prefill (`benchmarks/inference/results/raw_h100`), traced as `estimate_inference` traces
    it (bf16)."""
    rows = []
    for path in sorted((BENCH / "inference/results/raw_h100").glob("gen_*.json")):
        data = json.loads(path.read_text())
        model = data.get("built_from", path.stem.removeprefix("gen_"))
        for point in data["points"]:
            trace = trace_generation(
                model,
                context=point["context"],
                new_tokens=point["new_tokens"],
                batch=point["batch"],
                target=Target.of(device),
                dtype=torch.bfloat16,
            )
            spec = TrainSpec(model=model, batch=point["batch"], precision=Precision.BF16)
            name = f"inference/{path.stem}-b{point['batch']}-c{point['context']}"
            rows.append((name, spec, trace.prefill, point["prefill_seconds"]))
    return rows


def calibration_rows() -> dict[str, tuple[dict[str, Any], float]]:
    """name -> (TrainSpec keyword arguments, measured seconds) of every row the fit reads:
    the rows timed with a sync after every step, then those timed as a loop runs them (the
    names starting `steptime/`)."""
    from benchmarks.accuracy.cases import CASES

    rows: dict[str, tuple[dict[str, Any], float]] = {}
    timing = json.loads((BENCH / "timing/results/timing_h100.json").read_text())["cases"]
    for name, record in timing.items():
        rows[f"timing/{name}"] = (dict(CASES[name]), record["median_step_seconds"])
    runs: dict[str, list[float]] = {}
    faithful = json.loads((BENCH / "faithful/results/faithful_h100.json").read_text())
    for run in faithful["runs"]:
        if run.get("median_timed_step_seconds"):
            runs.setdefault(run["case"], []).append(run["median_timed_step_seconds"])
    for name, seconds in runs.items():
        kwargs = faithful_spec(name)
        if kwargs is not None:
            rows[f"faithful/{name}"] = (kwargs, statistics.median(seconds))
    return rows | window_rows()


def with_fit(base: Calibration, constants: dict[str, float]) -> Calibration:
    return dataclasses.replace(base, host_fit=dataclasses.replace(base.host_fit, **constants))


def descend(
    loss: Callable[[dict[str, float]], float], start: dict[str, float]
) -> tuple[dict[str, float], float]:
    """Coordinate descent over GRID from `start` (five rounds at most): the constants and
    their loss."""
    best = {name: start[name] for name in GRID}
    score = loss(best)
    for _ in range(5):
        moved = False
        for name, values in GRID.items():
            for value in values:
                trial = dict(best, **{name: value})
                s = loss(trial)
                if s < score - 1e-6:
                    best, score, moved = trial, s, True
        if not moved:
            break
    return best, score


def table_errors(rows: dict[str, tuple[float, float]]) -> dict[str, tuple[int, float, float]]:
    """table -> (rows, median, worst |predicted / measured - 1|)."""
    errors: dict[str, list[float]] = {}
    for row, (p, m) in rows.items():
        errors.setdefault(row.split("/")[0], []).append(abs(p / m - 1))
    return {t: (len(e), statistics.median(e), max(e)) for t, e in errors.items()}


def machine_factor(rows: dict[str, tuple[float, float]]) -> tuple[float, tuple[int, float, float]]:
    """The table's median measured/predicted ratio (geometric: the factor a perfect reading of
    its machine's speed would have scaled every prediction by) and the errors left after it
    (rows, median, worst)."""
    factor = math.exp(statistics.median(math.log(m / p) for p, m in rows.values()))
    scaled = {r: (p * factor, m) for r, (p, m) in rows.items()}
    return factor, next(iter(table_errors(scaled).values()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    parser.add_argument("--prefill", action="store_true", help="fit on the prefill rows too")
    parser.add_argument(
        "--eval", action="store_true", help="no fit: the shipped constants' errors per table"
    )
    parser.add_argument(
        "--optimizer-lines",
        action="store_true",
        help="optimizers' host cost from diagnose.py's steps (else the microbenchmarks')",
    )
    parser.add_argument(
        "--with-diagnose", action="store_true", help="fit on diagnose.py's host rows too"
    )
    parser.add_argument(
        "--with-blind", action="store_true", help="fit on the blind rows of blind_h100.json too"
    )
    parser.add_argument(
        "--with-recent", default="", help="fit on these sets of RECENT too (comma-separated)"
    )
    parser.add_argument(
        "--host-scale",
        type=float,
        default=1.0,
        help="with --eval: every host constant and optimizer line times this",
    )
    parser.add_argument(
        "--constant",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --eval: this constant instead of the shipped one (repeatable)",
    )
    args = parser.parse_args()
    device = get_device("h100")
    rows = calibration_rows()
    checks = check_rows()
    if args.with_diagnose:
        rows |= diagnose_rows()
    else:
        checks |= diagnose_rows()
    if args.with_blind:
        rows |= {n: r for n, r in checks.items() if n.startswith("blind/")}
    for name in args.with_recent.split(",") if args.with_recent else ():
        rows |= {n: r for n, r in checks.items() if n.split("/")[0] == name}
    traced = []
    for name, (kwargs, seconds) in (rows | checks).items():
        spec = TrainSpec(**kwargs, device="h100")
        trace = trace_step(spec, target=Target.of(device))
        traced.append((name, spec, trace, seconds, name in rows))
    prefills = prefill_rows(device) if args.prefill else []
    base = calibration()
    lines = optimizer_lines() if args.optimizer_lines else {}
    base = dataclasses.replace(
        base, host_fit=dataclasses.replace(base.host_fit, optimizer_lines=lines)
    )

    def predicted(cal: Calibration, fitted_only: bool) -> dict[str, tuple[float, float]]:
        """row -> (predicted, measured) seconds under `cal`."""
        out = {}
        for row, spec, trace, seconds, fitted in traced:
            if fitted_only and not fitted:
                continue
            t = step_time(
                trace.costs,
                spec,
                device,
                trace.tokens_per_sample,
                trace.trainable_tensors,
                cal=cal,
                synced_loop=row.split("/")[0] not in LOOP_TIMED,
            )
            out[row] = (t.seconds, seconds)
        for row, spec, costs, seconds in prefills:
            forward = step_time(costs, spec, device, cal=cal, synced_loop=True).forward_seconds
            out[row] = (forward, seconds)
        return out

    def loss(constants: dict[str, float]) -> float:
        errors: dict[str, list[float]] = {}
        for row, (p, m) in predicted(with_fit(base, constants), True).items():
            errors.setdefault(row.split("/")[0], []).append(abs(math.log(p / m)))
        # NB: each table weighs the same (the loop-timed rows are few but the method users see)
        return statistics.mean(statistics.mean(e) for e in errors.values())

    shipped = {**START, **json.loads(OUT.read_text())["constants"]}
    for item in args.constant:
        name, _, value = item.partition("=")
        if name not in shipped:
            raise SystemExit(f"--constant {item}: no constant {name!r}; one of {sorted(shipped)}")
        shipped[name] = float(value)
    if args.host_scale != 1.0:
        # NB: every host constant and optimizer line times one factor (a faster or slower host)
        shipped = {k: v * args.host_scale for k, v in shipped.items()}
        base = dataclasses.replace(
            base,
            host_fit=dataclasses.replace(
                base.host_fit,
                optimizer_lines={
                    k: (f * args.host_scale, p * args.host_scale)
                    for k, (f, p) in base.host_fit.optimizer_lines.items()
                },
            ),
        )
    if args.eval:
        best, score = shipped, loss(shipped)
    else:
        # NB: coordinate descent ends where the path leads on a flat optimum: from the
        # microbenchmarks' values and from the shipped fit, the better kept
        best, score = min((descend(loss, s) for s in (START, shipped)), key=lambda r: r[1])
    print(json.dumps({"loss": round(score, 4), "constants": best}, indent=1))
    everything = predicted(with_fit(base, best), False)
    for name, (p, m) in everything.items():
        print(f"{name}: {p / m - 1:+.1%}{'' if name in rows else ' (not fitted on)'}")
    for table, (n, median, worst) in table_errors(everything).items():
        factor, (_, m, w) = machine_factor(
            {r: pm for r, pm in everything.items() if r.split("/")[0] == table}
        )
        print(
            f"{table} ({n}): median {median:.1%}, worst {worst:.1%}; over the table's own "
            f"factor x{factor:.3f}: median {m:.1%}, worst {w:.1%}"
        )
    if args.write:
        record = {
            "source": "benchmarks/steptime/hostfit.py"
            + (" --with-diagnose" if args.with_diagnose else "")
            + (" --optimizer-lines" if lines else "")
            + ": coordinate descent over a grid, "
            "minimising the mean over the tables (timing, faithful, steptime"
            + (", diagnose" if args.with_diagnose else "")
            + (", blind" if args.with_blind else "")
            + (", inference prefill" if args.prefill else "")
            + ") of each table's "
            "mean |log(predicted/measured)| over the rows below"
            + (
                "; the optimizers' lines by least squares over diagnose.py's optimizer steps"
                if lines
                else ""
            ),
            "fitted_on": sorted([n for n, *_ in traced if n in rows] + [n for n, *_ in prefills]),
            "constants": {k: round(v, 9) for k, v in best.items()},
        }
        record["optimizer_lines"] = {
            k: [round(fixed, 9), round(per, 9)] for k, (fixed, per) in sorted(lines.items())
        }
        record["rnn_layer_seconds"] = base.host_fit.rnn_layer_seconds
        record["optimizer_paths"] = json.loads(OUT.read_text())["optimizer_paths"]
        OUT.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
