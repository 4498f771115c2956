"""Where the run-to-run spread of host-bound step times comes from, and the GPT-2 for-loop step.

    PYTHONPATH=src:. python -m benchmarks.steptime.protocol_study --out DIR [--deadline 380]

Part `protocol` (fresh processes, cases of blind4, already measured): in each process the
windows of `window.py` are timed under three conditions, interleaved round after round so
that the host's drift falls on each alike: `free` (the process's CPUs as started: the old
protocol), `one` (every thread of the process, the autograd and CUDA threads included,
pinned to one CPU with `os.sched_setaffinity`), `one-gc` (as `one`, Python's garbage
collector off). Per process and condition the median window; the run-to-run spread per
condition is over the processes. Each process also reads the host: CPU topology, the steal
and idle time of `/proc/stat` over its run, the cpufreq governor and idle states where the
VM exposes them, its thread count.

Part `gpt2` (one process per optimizer path, default foreach and for-loop): GPT-2 at batch 2,
64 tokens, bf16 autocast, AdamW, per phase (forward, backward, optimizer) the host's
`perf_counter` time and the device's CUDA-event time, in a loop without sync and synced
per step; and `optimizer.step()` alone over its tensors split by size.

Part `gru`: cuDNN GRU and LSTM calls in fp32, hidden 128-320, 1 and 2 layers, batch 16,
40 steps: forward and backward device time alone (events after a sync), to see which run the
stepped kernel backward.

Writes DIR/protocol_study.json.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import case_set
from benchmarks.steptime.measure_gpu import _environment, make_step
from benchmarks.steptime.window import windows

PROTOCOL_CASES = (
    "mlp-20x128-b16-adamw-fp32",
    "gru-h256-2l-b16-t40-fp32",
    "dpo-gpt2-bf16ref-b2-s64",
    "mlp-3x96-b4-sgd-fp32",
    "bn-cnn-sgd-fp32-b16-32px",
)
CONDITIONS = ("free", "one", "one-gc")


def pin_all(cpus: set[int]) -> None:
    """Every thread of this process onto `cpus`."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(tid), cpus)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_times() -> dict[str, list[int]]:
    """Per CPU (user, nice, system, idle, iowait, irq, softirq, steal) jiffies."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu"):
            name, *vals = line.split()
            out[name] = [int(v) for v in vals[:8]]
    return out


def host_facts() -> dict[str, Any]:
    n = os.cpu_count() or 0
    base = "/sys/devices/system/cpu"
    return {
        "cpus": n,
        "affinity": sorted(os.sched_getaffinity(0)),
        "siblings": [_read(f"{base}/cpu{i}/topology/thread_siblings_list") for i in range(n)],
        "packages": [_read(f"{base}/cpu{i}/topology/physical_package_id") for i in range(n)],
        "governor": _read(f"{base}/cpu0/cpufreq/scaling_governor"),
        "idle_driver": _read(f"{base}/cpuidle/current_driver"),
        "idle_states": [
            _read(f"{base}/cpu0/cpuidle/state{i}/name")
            for i in range(8)
            if Path(f"{base}/cpu0/cpuidle/state{i}").exists()
        ],
        "loadavg": os.getloadavg(),
        "lscpu": subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout,
    }


def protocol_one(name: str, cpu: int, rounds: int, count: int, window_ms: float) -> dict[str, Any]:
    import torch

    start_stat = cpu_times()
    build = case_set("blind4")[name]["build"]
    _, step = make_step(build)
    synced = []
    for _ in range(8):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        synced.append(time.perf_counter() - t)
    per_window = max(3, min(200, round(window_ms / 1000 / statistics.median(synced[-3:]))))
    free = set(os.sched_getaffinity(0))
    out: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    for _ in range(rounds):
        for cond in CONDITIONS:
            pin_all({cpu} if cond != "free" else free)
            if cond == "one-gc":
                gc.collect()
                gc.disable()
            for _ in range(2):
                step()
            out[cond] += windows(step, per_window, count)
            gc.enable()
    end_stat = cpu_times()
    delta = {k: [b - a for a, b in zip(start_stat[k], v, strict=True)] for k, v in end_stat.items()}
    return {
        "case": name,
        "cpu": cpu,
        "threads": len(os.listdir("/proc/self/task")),
        "steps_per_window": per_window,
        "windows": out,
        "medians": {c: statistics.median(v) for c, v in out.items()},
        "cpu_jiffies_delta": delta,
    }


def optimizer_alone(loss_fn: Any, params: list[Any], flags: dict[str, Any]) -> dict[str, Any]:
    """`optimizer.step()` alone, grads kept: all tensors, then large (>= 1M elements) and
    small ones; the host's time per call and the events' time per call, in a loop and synced."""
    import torch

    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn()
    loss.backward()
    groups = {
        "all": params,
        "large": [p for p in params if p.numel() >= 1 << 20],
        "small": [p for p in params if p.numel() < 1 << 20],
    }
    alone = {}
    for key, ps in groups.items():
        o = torch.optim.AdamW(ps, lr=1e-5, **flags)
        for _ in range(3):
            o.step()
        torch.cuda.synchronize()
        for mode in ("loop", "synced"):
            host, a, b = [], ev(), ev()
            a.record()
            for _ in range(10):
                if mode == "synced":
                    torch.cuda.synchronize()
                t = time.perf_counter()
                o.step()
                host.append(time.perf_counter() - t)
            b.record()
            torch.cuda.synchronize()
            alone[f"{key}-{mode}"] = {
                "tensors": len(ps),
                "elements": sum(p.numel() for p in ps),
                "host_seconds": statistics.median(host),
                "events_seconds_per_call": a.elapsed_time(b) / 1e3 / 10,
            }
    return alone


def gpt2_one(path: str | None) -> dict[str, Any]:
    import torch

    from benchmarks.steptime.blind5_cases import CASES

    which = "forloop" if path == "for-loop" else "default"
    name = f"gpt2-b2-s64-adamw-{which}-bf16"
    build = dict(CASES[name]["build"])
    # the same step as make_step, split into phases
    from benchmarks.steptime.measure_gpu import _hf

    model, loss_fn = _hf(build)
    params = [p for p in model.parameters() if p.requires_grad]
    flags = {"foreach": False} if path == "for-loop" else {}
    opt = torch.optim.AdamW(params, lr=1e-5, **flags)
    model.train()
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731

    def phases(sync: bool) -> tuple[list[float], list[Any]]:
        marks, events = [], []
        for i, part in enumerate(("forward", "backward", "optimizer")):
            if sync and i == 0:
                torch.cuda.synchronize()
            e = ev()
            e.record()
            events.append(e)
            marks.append(time.perf_counter())
            if part == "forward":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    holder["loss"] = loss_fn()
            elif part == "backward":
                holder["loss"].backward()
            else:
                opt.step()
                opt.zero_grad(set_to_none=True)
        e = ev()
        e.record()
        events.append(e)
        if sync:
            torch.cuda.synchronize()
        marks.append(time.perf_counter())
        return marks, events

    holder: dict[str, Any] = {}
    for _ in range(6):
        phases(True)
    rec: dict[str, Any] = {"path": path or "default", "tensors": len(params)}
    for mode in ("loop", "synced"):
        rows = [phases(mode == "synced") for _ in range(20)]
        torch.cuda.synchronize()
        host = [[m[i + 1] - m[i] for i in range(3)] for m, _ in rows]
        dev = [[e[i].elapsed_time(e[i + 1]) / 1e3 for i in range(3)] for _, e in rows]
        rec[mode] = {
            "host_phase_seconds": [statistics.median(h[i] for h in host) for i in range(3)],
            "device_phase_seconds": [statistics.median(d[i] for d in dev) for i in range(3)],
            "step_host_seconds": statistics.median(sum(h) for h in host),
            "step_device_seconds": statistics.median(sum(d) for d in dev),
        }
    rec["optimizer_alone"] = optimizer_alone(loss_fn, params, flags)
    # the whole step in windows, as window.py, free and pinned to one CPU
    from benchmarks.steptime.measure_gpu import make_step as make

    _, step = make(build)
    for _ in range(5):
        step()
    free = set(os.sched_getaffinity(0))
    for cond in ("free", "one", "free", "one"):
        pin_all({2} if cond == "one" else free)
        rec.setdefault(f"window_{cond}", []).extend(windows(step, 3, 6))
    return rec


def gru_part() -> list[dict[str, Any]]:
    import torch

    rows = []
    for mode in ("GRU", "LSTM"):
        for hidden in (128, 160, 192, 256, 320):
            for layers in (1, 2):
                cls = torch.nn.GRU if mode == "GRU" else torch.nn.LSTM
                rnn = cls(128, hidden, layers, batch_first=True).cuda()
                x = torch.randn(16, 40, 128, device="cuda", requires_grad=True)
                fwd, bwd = [], []
                for i in range(13):
                    torch.cuda.synchronize()
                    a, b, c = (torch.cuda.Event(enable_timing=True) for _ in range(3))
                    a.record()
                    y, _ = rnn(x)
                    b.record()
                    y.sum().backward()
                    c.record()
                    torch.cuda.synchronize()
                    if i >= 3:
                        fwd.append(a.elapsed_time(b))
                        bwd.append(b.elapsed_time(c))
                rows.append(
                    dict(
                        mode=mode,
                        hidden=hidden,
                        layers=layers,
                        forward_ms=statistics.median(fwd),
                        backward_ms=statistics.median(bwd),
                    )
                )
    return rows


def _child(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.steptime.protocol_study", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1], "args": args}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=380.0)
    parser.add_argument("--protocol-one", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, default=2)
    parser.add_argument("--gpt2-one", help=argparse.SUPPRESS)
    parser.add_argument("--gru-one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.protocol_one:
        print(json.dumps(protocol_one(args.protocol_one, args.cpu, args.rounds, args.windows, 100)))
        return
    if args.gpt2_one:
        print(json.dumps(gpt2_one(None if args.gpt2_one == "default" else args.gpt2_one)))
        return
    if args.gru_one:
        print(json.dumps(gru_part()))
        return
    began = time.perf_counter()
    record: dict[str, Any] = {"environment": _environment(), "host": host_facts()}
    record["settings"] = {k: str(v) for k, v in vars(args).items()}
    args.out.mkdir(parents=True, exist_ok=True)
    dump = lambda: (args.out / "protocol_study.json").write_text(json.dumps(record, indent=1))  # noqa: E731
    record["gru"] = _child(["--gru-one"])
    dump()
    record["gpt2"] = [_child(["--gpt2-one", p]) for p in ("default", "for-loop")]
    dump()
    record["protocol"] = []
    for repeat in range(args.repeat):
        for name in PROTOCOL_CASES:
            if time.perf_counter() - began > args.deadline - 25:
                record["protocol"].append({"case": name, "repeat": repeat, "error": "deadline"})
                continue
            extra = ["--rounds", str(args.rounds), "--windows", str(args.windows)]
            row = _child(["--protocol-one", name, "--cpu", str(2 + 2 * repeat), *extra])
            row["repeat"] = repeat
            record["protocol"].append(row)
            print(
                name,
                repeat,
                {k: round(v * 1e3, 3) for k, v in row.get("medians", {}).items()},
                row.get("error", ""),
                flush=True,
            )
            dump()
    print("done", round(time.perf_counter() - began), flush=True)


if __name__ == "__main__":
    main()
