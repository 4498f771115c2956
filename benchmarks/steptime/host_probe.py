"""Quick host probes beside timed steps: can a few seconds' reading tell this machine's host speed?

    PYTHONPATH=src:. python -m benchmarks.steptime.host_probe --out DIR [--set blind6]
        [--repeat 2] [--deadline 450] [--reads 5]

Each case runs as `window.py` runs it (a fresh process per run, every case once per round,
round after round; `window.run_one` with 5 warm-up + 3 synced steps and 24 + 1 windows of
about 100 ms), and the same process reads every probe of `PROBES` just before building its
case and again just after timing it. The driver also reads the probes in a fresh process with
no case loaded at the start and at the end of the call (`--probe-only`), and records what it
can see of the machine (`machine_facts`). Each probe is read `--reads` times; a reading is the
host's time of one unit (lower is faster, except the two bandwidths, in GB/s). Writes
DIR/host_probe.json (environment, machine facts, probe-only readings and one record per run).

The probes (what part of a host-bound step each stands for):
- `cuda_dispatch_us`: `window.host_reference`'s `x.add_(1)` on a one-element CUDA tensor;
- `cuda_roundtrip_us`: that op and a `torch.cuda.synchronize()` (the host-device round trip);
- `linear_step_us`: `nn.Linear(16, 16)` on CUDA, forward + backward + SGD step, no sync;
- `mlp_adam_step_us`: 4 x (Linear(32, 32) + ReLU) on CUDA with Adam (default foreach path);
- `cpu_dispatch_us`: `x.add_(1)` on a one-element CPU tensor (ATen's dispatcher, no CUDA);
- `cpu_autograd_us`: a three-op CPU graph's forward and `backward()` (the autograd engine);
- `python_loop_ns`: a pure-Python arithmetic loop, per iteration (the interpreter);
- `python_calls_ns`: a Python method call with attribute reads, per call;
- `memcpy_gbps`: copying 128 MiB host to host (memory bandwidth);
- `h2d_gbps`: 64 MiB from pageable host memory to the device.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.steptime.cases import case_set
from benchmarks.steptime.measure_gpu import _environment
from benchmarks.steptime.window import host_reference, run_one

WINDOW_SETTINGS = dict(
    warmup=5, synced=3, windows=24, window_ms=100.0, gc_off=False, host_ref=False
)


def _timed(body: Callable[[], None], count: int, scale: float, sync: bool = False) -> float:
    """Host time of `count` calls of `body`, per call, times `scale`."""
    import torch

    if sync:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        body()
    elapsed = time.perf_counter() - start
    if sync:
        torch.cuda.synchronize()
    return elapsed / count * scale


def _step_probe(model: Any, optimizer: Any, x: Any) -> Callable[[], None]:
    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(x).sum().backward()
        optimizer.step()

    for _ in range(20):
        step()
    return step


class _Box:
    def __init__(self) -> None:
        self.value, self.step = 0, 3

    def bump(self, by: int) -> int:
        self.value = (self.value + by * self.step) % 1009
        return self.value


def _python_loop() -> None:
    total = 0
    for i in range(1000):
        total += i * i % 7


def probes(reads: int) -> dict[str, list[float]]:
    """Every probe read `reads` times: name -> readings."""
    import torch

    out: dict[str, list[float]] = {}
    out["cuda_dispatch_us"] = host_reference(dispatches=4000, repeats=reads)["dispatch_us"]
    x = torch.zeros(1, device="cuda")

    def roundtrip() -> None:
        x.add_(1)
        torch.cuda.synchronize()

    out["cuda_roundtrip_us"] = [_timed(roundtrip, 400, 1e6) for _ in range(reads)]
    lin = torch.nn.Linear(16, 16).cuda()
    step = _step_probe(lin, torch.optim.SGD(lin.parameters(), lr=1e-3), torch.randn(8, 16).cuda())
    out["linear_step_us"] = [_timed(step, 100, 1e6, sync=True) for _ in range(reads)]
    layers: list[Any] = []
    for _ in range(4):
        layers += [torch.nn.Linear(32, 32), torch.nn.ReLU()]
    mlp = torch.nn.Sequential(*layers).cuda()
    step = _step_probe(mlp, torch.optim.Adam(mlp.parameters(), lr=1e-3), torch.randn(8, 32).cuda())
    out["mlp_adam_step_us"] = [_timed(step, 40, 1e6, sync=True) for _ in range(reads)]
    c = torch.zeros(1)
    out["cpu_dispatch_us"] = [_timed(lambda: c.add_(1), 4000, 1e6) for _ in range(reads)]
    a = torch.ones(4, requires_grad=True)
    out["cpu_autograd_us"] = [
        _timed(lambda: (a * 2 + 1).tanh().sum().backward(), 300, 1e6) for _ in range(reads)
    ]
    out["python_loop_ns"] = [_timed(_python_loop, 100, 1e9 / 1000) for _ in range(reads)]
    box = _Box()
    out["python_calls_ns"] = [_timed(lambda: box.bump(2), 50000, 1e9) for _ in range(reads)]
    src, dst = torch.ones(128 << 20, dtype=torch.uint8), torch.empty(128 << 20, dtype=torch.uint8)
    out["memcpy_gbps"] = [
        (128 << 20) / _timed(lambda: dst.copy_(src), 3, 1e9) for _ in range(reads)
    ]
    host = torch.ones(64 << 20, dtype=torch.uint8)
    out["h2d_gbps"] = [
        (64 << 20) / _timed(lambda: host.to("cuda"), 3, 1e9, sync=True) for _ in range(reads)
    ]
    return out


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"


def machine_facts() -> dict[str, Any]:
    """What the guest can see of its machine: CPU fields, kernel, GPU clocks and PCIe link."""
    info = Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in info)}
    keep = ("model name", "stepping", "microcode", "cpu MHz", "cache size", "bogomips", "flags")
    return {
        "cpu": {k: fields[k] for k in keep if k in fields},
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "loadavg": os.getloadavg(),
        "lscpu": _run(["lscpu"]),
        "meminfo": Path("/proc/meminfo").read_text().splitlines()[:3],
        "gpu": _run(
            [
                "nvidia-smi",
                "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,pcie.link.gen.current,"
                "pcie.link.width.current,power.draw,temperature.gpu,pstate",
                "--format=csv",
            ]
        ),
        "gpu_topology": _run(["nvidia-smi", "topo", "-m"]),
    }


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    begun = time.perf_counter()
    record: dict[str, Any] = {"probes_before": probes(args.reads)}
    if args.probe_only:
        return record
    torch.cuda.reset_peak_memory_stats()
    build = case_set(args.set)[args.one]["build"]
    record.update(run_one(build, argparse.Namespace(**WINDOW_SETTINGS)))
    record["probes_after"] = probes(args.reads)
    record["process_seconds"] = time.perf_counter() - begun
    return record


def _spawn(extra: list[str], args: argparse.Namespace, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.steptime.host_probe", "--set", args.set]
    cmd += ["--reads", str(args.reads), *extra]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--set", default="blind6")
    parser.add_argument("--cases", default="")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=450.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--probe-only", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse()
    if args.one or args.probe_only:
        print(json.dumps(child(args)))
        return
    started = time.perf_counter()
    names = [n for n in args.cases.split(",") if n] or list(case_set(args.set))
    record: dict[str, Any] = {
        "environment": _environment(),
        "settings": {**vars(args), "out": str(args.out), "window": WINDOW_SETTINGS},
        "machine_facts": machine_facts(),
        "probe_only": [_spawn(["--probe-only"], args, 60)],
        "runs": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "host_probe.json"
    for repeat in range(args.repeat):
        for name in names:
            left = args.deadline - (time.perf_counter() - started)
            if left < 40:
                record["runs"].append({"case": name, "repeat": repeat, "error": "deadline"})
                continue
            row = {"case": name, "repeat": repeat, **_spawn(["--one", name], args, min(left, 150))}
            record["runs"].append(row)
            probe = statistics.median(row.get("probes_before", {}).get("cuda_dispatch_us", [0]))
            step = row.get("window_median_seconds", 0) * 1e3
            print(
                f"[{repeat}] {name}: {row.get('error', f'{step:.2f} ms')}, dispatch {probe:.2f} us",
                flush=True,
            )
            path.write_text(json.dumps(record, indent=1) + "\n")
    record["probe_only"].append(_spawn(["--probe-only"], args, 60))
    record["machine_facts_end"] = machine_facts()
    record["seconds"] = time.perf_counter() - started
    path.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
