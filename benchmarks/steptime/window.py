"""Time step-time cases as a training loop runs them: windows of steps, one sync at the end.

    PYTHONPATH=src:. python -m benchmarks.steptime.window --out DIR
        [--set heldout|blind|blind2|blind3|blind4] [--cases a,b] [--repeat 3] [--first-repeat 0]
        [--host-ref] [--pin 2-5] [--pin-every 2]

A training loop does not wait for the device after each step: the host issues the next step's
kernels while the device still runs the last one, and waits only where the loop reads a value
back (a logged loss, every N steps). So the step time a user sees is the steady period of that
pipeline. Each case runs in a fresh process (`--one`): `--warmup` untimed steps (where a DPO
reference copy and the optimizer state are made), then, with no synchronisation in between,
`windows + 1` windows of N steps each, CUDA events recorded on the stream between windows; the
first window (the pipeline filling) is dropped and each window's elapsed device time over N is
one sample of the step; the run's figure is their median. N is chosen from the synced warm-up
steps so that a window lasts about `--window-ms`. With `--host-ref` each process also times the
host's dispatch of a tiny CUDA op and reads the CPU's clock before and after its case
(`host_reference`), so host drift between runs and calls is visible.

Beside it, for comparison with the earlier tables, the same process times `--synced` steps the
old way (`measure_gpu.py`: the device synchronised before and after each step, the host's
clock, the median), and, with `--gc-off`, the windows again with Python's garbage collector
disabled. `--pin CPUS` runs every `--pin-every`-th process pinned to those CPUs
(`os.sched_setaffinity`, inherited by the autograd and CUDA threads). Writes DIR/window.json
(environment + one record per case and run).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import SETS, case_set
from benchmarks.steptime.measure_gpu import _environment, child_row, make_step


def cpu_set(text: str) -> set[int]:
    """'2-5,8' -> {2, 3, 4, 5, 8}."""
    out: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def windows(step: Any, per_window: int, count: int) -> list[float]:
    """Seconds per step of each of `count` windows of `per_window` steps, run back to back
    without a sync (CUDA events between windows; the first, filling window dropped)."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 2)]
    torch.cuda.synchronize()
    events[0].record()
    for event in events[1:]:
        for _ in range(per_window):
            step()
        event.record()
    events[-1].synchronize()
    return [events[i].elapsed_time(events[i + 1]) / 1000 / per_window for i in range(1, count + 1)]


def host_reference(dispatches: int = 20000, repeats: int = 3) -> dict[str, Any]:
    """How fast this host issues work now: the host's microseconds per `x.add_(1)` on a
    one-element CUDA tensor over `dispatches` calls with no sync in between (each of `repeats`
    loops; the device keeps up, so this is the dispatch path's host cost), and the CPU's
    model and current clock (`/proc/cpuinfo`, mean MHz over the CPUs) and load average."""
    import torch

    x = torch.zeros(1, device="cuda")
    for _ in range(500):
        x.add_(1)
    torch.cuda.synchronize()
    loops = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(dispatches):
            x.add_(1)
        loops.append((time.perf_counter() - start) / dispatches * 1e6)
        torch.cuda.synchronize()
    info = Path("/proc/cpuinfo").read_text().splitlines()
    mhz = [float(line.split(":")[1]) for line in info if line.startswith("cpu MHz")]
    model = next((line.split(":")[1].strip() for line in info if line.startswith("model name")), "")
    return {
        "dispatch_us": loops,
        "dispatch_median_us": statistics.median(loops),
        "cpu_model": model,
        "cpu_mhz_mean": statistics.mean(mhz) if mhz else None,
        "loadavg": os.getloadavg()[0],
    }


def run_one(build: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    import torch

    begun = time.perf_counter()
    before = host_reference() if args.host_ref else None
    tensors, step = make_step(build)
    synced: list[float] = []
    for _ in range(args.warmup + args.synced):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        synced.append(time.perf_counter() - start)
    typical = statistics.median(synced[-max(3, args.synced) :])
    per_window = max(3, min(200, round(args.window_ms / 1000 / typical)))
    window = windows(step, per_window, args.windows)
    record: dict[str, Any] = {
        "build": build,
        "trainable_tensors": tensors,
        "affinity": sorted(os.sched_getaffinity(0)),
        "warmup": args.warmup,
        "synced_step_seconds": synced[args.warmup :],
        "synced_median_seconds": statistics.median(synced[args.warmup :]),
        "steps_per_window": per_window,
        "window_step_seconds": window,
        "window_median_seconds": statistics.median(window),
    }
    if args.gc_off:
        gc.collect()
        gc.disable()
        off = windows(step, per_window, args.windows)
        gc.enable()
        record["gc_off_step_seconds"] = off
        record["gc_off_median_seconds"] = statistics.median(off)
    record["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
    if before is not None:
        record["host_reference_before"] = before
        record["host_reference_after"] = host_reference()
    record["process_seconds"] = time.perf_counter() - begun
    return record


def _child(name: str, args: argparse.Namespace, pinned: bool) -> list[str]:
    cmd = [sys.executable, "-m", "benchmarks.steptime.window", "--one", name, "--set", args.set]
    for flag in ("warmup", "synced", "windows", "window_ms"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if args.gc_off:
        cmd.append("--gc-off")
    if args.host_ref:
        cmd.append("--host-ref")
    if pinned:
        cmd += ["--pin", args.pin]
    return cmd


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--set",
        default="heldout",
        choices=tuple(SETS),
    )
    parser.add_argument("--cases", default="")
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--synced", type=int, default=20)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window-ms", type=float, default=100.0)
    parser.add_argument("--gc-off", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--first-repeat", type=int, default=0, help="number the repeats from")
    parser.add_argument(
        "--host-ref",
        action="store_true",
        help="time the host's dispatch (host_reference) before and after each case",
    )
    parser.add_argument("--pin", default="")
    parser.add_argument("--pin-every", type=int, default=0, help="pin every Nth run (0: none)")
    parser.add_argument("--deadline", type=float, default=500.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse()
    if args.one:
        if args.pin:
            os.sched_setaffinity(0, cpu_set(args.pin))
        record = run_one(case_set(args.set)[args.one]["build"], args)
        print(json.dumps({"case": args.one, **record}))
        return
    started = time.perf_counter()
    cases = case_set(args.set)
    names = [n for n in args.cases.split(",") if n] or list(cases)
    record: dict[str, Any] = {
        "environment": _environment(),
        "settings": dict(vars(args)),
        "runs": [],
    }
    record["settings"]["out"] = str(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    # NB: every case once per round, round after round (A B C ... A B C ...), so the host's
    # drift over the call falls on every case alike
    for repeat in range(args.first_repeat, args.first_repeat + args.repeat):
        pinned = bool(args.pin and args.pin_every and repeat % args.pin_every == 1)
        for name in names:
            left = args.deadline - (time.perf_counter() - started)
            if left < 25:
                record["runs"].append({"case": name, "repeat": repeat, "error": "deadline"})
                continue
            row = child_row(_child(name, args, pinned), name, min(left, 150))
            row.update(repeat=repeat, pinned=pinned)
            record["runs"].append(row)
            if "error" in row:
                print(f"[{repeat}] {name}: {row['error']}", flush=True)
            else:
                print(
                    f"[{repeat}{'p' if pinned else ''}] {name}: synced "
                    f"{row['synced_median_seconds'] * 1e3:.2f} ms, window "
                    f"{row['window_median_seconds'] * 1e3:.2f} ms x{row['steps_per_window']}",
                    flush=True,
                )
            (args.out / "window.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
