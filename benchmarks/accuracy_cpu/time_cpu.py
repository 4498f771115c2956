"""The CPU step-time model against real steps on this machine.

    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.time_cpu measure --only emotion-mlp-fp32
    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.time_cpu fit       # backward_op_seconds
    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.time_cpu predict   # commit this first
    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.time_cpu measure   # then measure
    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.time_cpu table

`measure` runs each case in a fresh process (`trainfit.measure.measure` on the CPU: one
warm-up step, then timed steps) and appends a run to results/time_measured_cpu.json (runs are
never overwritten): every step's wall time and this process's CPU time (getrusage, through
`measure`'s `on_step` callback), and the load average before and after. Each case runs twice:
on one thread, where the step's CPU time is what its wall time would be on an idle core, and
on all of PyTorch's threads (2 here), whose wall time is what a user sees but depends on the
load of this shared machine. `predict` writes results/time_predicted_cpu.json from the shipped
calibration for both thread counts; held-out predictions are committed before their cases are
measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.accuracy_cpu.time_cases import FIT, TIME_CASES

RESULTS = Path(__file__).parent / "results"
PREDICTIONS = {
    "first model": RESULTS / "time_predicted_cpu.json",
    "second model (3x3 convolution rates)": RESULTS / "time_predicted_cpu_conv.json",
}
"""Each model's committed predictions, oldest first; `predict` writes the last."""
PREDICTED = list(PREDICTIONS.values())[-1]
MEASURED = RESULTS / "time_measured_cpu.json"
TABLE = RESULTS / "time_accuracy_cpu.md"
CALIBRATION = Path(__file__).parents[2] / "src" / "trainfit" / "timing" / "cpu_calibration.json"


def _environment() -> dict[str, Any]:
    import torch

    from trainfit.hardware.cpu_features import cpu_features

    f = cpu_features()
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
        "cpu": f.model,
        "cores": f.cores,
        "torch_threads": f.threads,
        "clock_mhz": f.clock_mhz,
        "flags": sorted(x for x in f.flags if x.startswith(("avx", "amx", "fma"))),
        "torch": torch.__version__,
        "transformers": _transformers(),
    }


def _transformers() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


def _spec(name: str) -> Any:
    from trainfit import TrainSpec

    return TrainSpec(**TIME_CASES[name], device="cpu")


THREADS = (1, 2)


def predict(names: list[str]) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {}
    for name in names:
        for threads in THREADS:
            out.setdefault(name, {})[str(threads)] = _predict_one(name, threads)
    torch.set_num_threads(THREADS[-1])
    return out


def _predict_one(name: str, threads: int) -> dict[str, Any]:
    import torch

    from trainfit import estimate
    from trainfit.plan.time_words import basis_text, time_note_text

    torch.set_num_threads(threads)
    step = estimate(_spec(name)).step_time
    assert step is not None, name
    print(f"{name} on {threads} threads: {step.seconds:.3f} s", flush=True)
    return {
        "fit": name in FIT,
        "step_seconds": step.seconds,
        "forward_seconds": step.forward_seconds,
        "backward_seconds": step.backward_seconds,
        "optimizer_seconds": step.optimizer_seconds,
        "basis": basis_text(step.basis),
        "notes": [time_note_text(n) for n in step.notes],
    }


def _child(name: str, steps: int, threads: int) -> None:
    import torch

    from trainfit.measure.steps import measure

    torch.set_num_threads(threads)
    cpu: list[float] = []
    last = [_cpu_seconds()]

    def on_step(done: Any) -> None:
        now = _cpu_seconds()
        cpu.append(now - last[0])
        last[0] = now

    before = list(os.getloadavg())
    m = measure(_spec(name), steps=steps, warmup=1, device="cpu", on_step=on_step)
    record = {
        "step_seconds": list(m.step_seconds),
        "cpu_seconds": cpu[1:],
        "build_and_warmup_cpu_seconds": cpu[0] if cpu else None,
        "load_before": before,
        "load_after": list(os.getloadavg()),
    }
    print("RESULT " + json.dumps(record), flush=True)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(names: list[str], steps: int, counts: tuple[int, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        for threads in counts:
            cmd = [sys.executable, "-m", "benchmarks.accuracy_cpu.time_cpu", "child", name]
            cmd += ["--steps", str(steps), "--threads", str(threads)]
            run = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
            lines = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
            if not lines:
                raise RuntimeError(f"{name}: no result\n{run.stderr[-2000:]}")
            got = json.loads(lines[-1].removeprefix("RESULT "))
            out.setdefault(name, {})[str(threads)] = got
            print(
                f"{name} on {threads} threads: wall {statistics.median(got['step_seconds']):.3f}"
                f" s, CPU {statistics.median(got['cpu_seconds']):.3f} s, load "
                f"{got['load_before'][0]:.1f}",
                flush=True,
            )
    return out


def fit() -> None:
    """backward_op_seconds: the mean over the FIT cases of (measured median CPU time on one
    thread - modelled with no autograd cost) / backward ops, from their latest measured run."""
    import dataclasses

    import torch

    from trainfit.hardware.cpu_features import cpu_features
    from trainfit.timing.cpu import cpu_calibration, cpu_step_time
    from trainfit.trace.step import trace_step
    from trainfit.trace.target import Target

    torch.set_num_threads(1)
    runs = json.loads(MEASURED.read_text())["runs"]
    cal = dataclasses.replace(cpu_calibration(), backward_op_seconds=0.0)
    implied = []
    for name in FIT:
        measured = next(r["cases"][name]["1"] for r in reversed(runs) if name in r["cases"])
        spec = _spec(name)
        trace = trace_step(spec, target=Target.cpu())
        base = cpu_step_time(trace.costs, spec, cpu_features(), cal=cal).seconds
        ops = len(trace.costs.backward) * spec.grad_accum
        implied.append((statistics.median(measured["cpu_seconds"]) - base) / ops)
        print(f"{name}: modelled without autograd {base:.3f} s, implies {implied[-1]:.2e} s/op")
    record = json.loads(CALIBRATION.read_text())
    record["backward_op_seconds"] = max(0.0, statistics.mean(implied))
    record["fitted_on"] = list(FIT)
    CALIBRATION.write_text(json.dumps(record, indent=1) + "\n")
    print(f"backward_op_seconds = {record['backward_op_seconds']:.3e}")


def table() -> str:
    """The Markdown table: every measured run of every case beside each model's committed
    prediction; a case is held out from a model when it was not fitted on and was measured
    after that model's predictions were made."""
    runs = json.loads(MEASURED.read_text())["runs"]
    lines = [
        "# CPU step time: predicted against measured",
        "",
        "Generated by `python -m benchmarks.accuracy_cpu.time_cpu table` from each model's",
        "committed predictions (`time_predicted_cpu*.json`) and `time_measured_cpu.json` (see",
        "`time_cpu.py` for the method). Error = predicted / measured - 1. On 1 thread the",
        "measured figure is the median CPU time of the timed steps (what the step takes on an",
        "idle core); on 2 threads it is the median wall time, and the fastest step's, on this",
        "machine shared with other work (the load average over 1 minute before the case is",
        "given; 2 cores). The wall median is given for every row. *seen*: measured before the",
        "model's predictions were made.",
        "",
    ]
    for model, path in PREDICTIONS.items():
        if not path.exists():
            continue
        predicted = json.loads(path.read_text())
        env = predicted["environment"]
        lines += [
            f"## {model[0].upper()}{model[1:]}: `{path.name}`",
            "",
            f"Predicted {env['date']} on {env['cpu']} ({env['cores']} cores, "
            f"{env['clock_mhz']} MHz; flags {' '.join(env['flags'])}), torch {env['torch']}, "
            f"transformers {env['transformers']}.",
            "",
        ]
        for run in runs:
            lines += _run_table(run, predicted)
    return "\n".join(lines)


def _run_table(run: dict[str, Any], predicted: dict[str, Any]) -> list[str]:
    e = run["environment"]
    lines = [
        f"### Measured {e['date']} (torch {e['torch']}, {e['cpu']}, {e['cores']} cores)",
        "",
        "| case | role | threads | predicted s | measured s | error | fastest s | error "
        "(fastest) | wall median s | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, by_threads in run["cases"].items():
        role = "fitted on" if name in FIT else "held out"
        if role == "held out" and e["date"] < predicted["environment"]["date"]:
            role = "seen"
        for threads, m in by_threads.items():
            lines.append(_row(name, role, threads, m, predicted["cases"].get(name, {})))
    return [*lines, ""]


def _row(name: str, role: str, threads: str, m: dict[str, Any], p: dict[str, Any]) -> str:
    key = "cpu_seconds" if threads == "1" else "step_seconds"
    median, best = statistics.median(m[key]), min(m[key])
    pred = p.get(threads, {}).get("step_seconds")
    if pred is None:
        cells = ["-", f"{median:.3f}", "-", f"{best:.3f}", "-"]
    else:
        cells = [f"{pred:.3f}", f"{median:.3f}", f"{pred / median - 1:+.0%}", f"{best:.3f}",
                 f"{pred / best - 1:+.0%}"]  # fmt: skip
    cells.append(f"{statistics.median(m['step_seconds']):.3f}")
    return f"| {name} | {role} | {threads} | {' | '.join(cells)} | {m['load_before'][0]:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("predict", "measure", "fit", "table", "child"))
    parser.add_argument("name", nargs="?")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="child: torch threads")
    parser.add_argument("--thread-counts", default="1,2", help="measure: thread counts")
    args = parser.parse_args()
    names = args.only or list(TIME_CASES)
    if args.what == "child":
        _child(args.name, args.steps, args.threads)
    elif args.what == "predict":
        data = {"environment": _environment(), "cases": predict(names)}
        PREDICTED.write_text(json.dumps(data, indent=1) + "\n")
    elif args.what == "measure":
        old = json.loads(MEASURED.read_text()) if MEASURED.exists() else {"runs": []}
        old["runs"].append(
            {
                "environment": _environment(),
                "cases": measure(
                    names, args.steps, tuple(int(x) for x in args.thread_counts.split(","))
                ),
            }
        )
        MEASURED.write_text(json.dumps(old, indent=1) + "\n")
    elif args.what == "fit":
        fit()
    else:
        TABLE.write_text(table() + "\n")


if __name__ == "__main__":
    main()
