"""The host cost of an optimizer step on each of PyTorch's paths (for-loop, foreach, fused).

    PYTHONPATH=src:. python -m benchmarks.steptime.optimizer_paths measure --out DIR [--repeat 3]
    PYTHONPATH=src:. python -m benchmarks.steptime.optimizer_paths report DIR

`measure` (one GPU call): in `--repeat` fresh processes, SGD, SGD-momentum, Adam, AdamW (each on
the for-loop, foreach and fused paths) and Adafactor (for-loop, foreach) step over N parameters
of 1024 fp32 elements each (N = 8, 32, 128, 512), their gradients set: device work is a few
microseconds a kernel, so a loop of steps with one sync at each end times the host. Each figure
is the median of 3 loops of about 0.15 s. Each process also times 20,000 in-place adds on a
one-element CUDA tensor (the host's dispatch speed, to compare runs and sessions).
Writes DIR/optimizer_paths.json.

`report`: per optimizer and path, the least-squares line (fixed + per tensor) over N of the
median over processes, into DIR/optimizer_paths.md, beside the host-cost lines trainfit
uses now (`host_fit.json` `optimizer_lines`, measured on the foreach path).

`record DIR`: each path's fixed and per-tensor cost as ratios to the same optimizer's CUDA
default path in the same processes (foreach; Adafactor's for-loop), the lines weighted by
1/y^2 (relative error, so the small lists count as much as the large), into
`host_fit.json` `optimizer_paths`: the step-time model scales the shipped host cost of the
default path by them. Ratios, not the lines themselves: the host's speed moved 50-100%
between these processes and between sessions, while the ratios are of one process's loops.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TENSORS = (8, 32, 128, 512)
ELEMENTS = 1024
PATHS = {
    "sgd": ("for-loop", "foreach", "fused"),
    "sgd-momentum": ("for-loop", "foreach", "fused"),
    "adam": ("for-loop", "foreach", "fused"),
    "adamw": ("for-loop", "foreach", "fused"),
    "adafactor": ("for-loop", "foreach"),
}


def _make(kind: str, path: str, params: list[Any]) -> Any:
    import torch

    flags = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}}.get(
        path, {"fused": True}
    )
    if kind == "sgd":
        return torch.optim.SGD(params, lr=1e-3, **flags)
    if kind == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **flags)
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-5, **flags)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-5, **flags)
    return torch.optim.Adafactor(params, lr=1e-3, **flags)


def _host_us(fn: Any) -> float:
    """Microseconds per call of `fn`, timed as loops of about 0.15 s with a sync at each end."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    calls = max(5, min(400, int(0.15 / max(time.perf_counter() - start, 1e-6))))
    loops = []
    for _ in range(3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        loops.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(loops)


def _dispatch_us() -> float:
    import torch

    one = torch.zeros(1, device="cuda")
    for _ in range(1000):
        one.add_(1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20_000):
        one.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / 20_000 * 1e6


def one_process() -> dict[str, Any]:
    import torch

    rows = []
    for kind, paths in PATHS.items():
        for path in paths:
            for n in TENSORS:
                params = [
                    torch.nn.Parameter(torch.randn(ELEMENTS, device="cuda")) for _ in range(n)
                ]
                for p in params:
                    p.grad = torch.randn_like(p)
                opt = _make(kind, path, params)
                rows.append(dict(optimizer=kind, path=path, tensors=n, step_us=_host_us(opt.step)))
    return {"dispatch_us": _dispatch_us(), "rows": rows}


def measure(out: Path, repeat: int) -> None:
    from benchmarks.steptime.measure_gpu import _environment

    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"environment": _environment(), "runs": []}
    for i in range(repeat):
        cmd = [sys.executable, "-m", "benchmarks.steptime.optimizer_paths", "one"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=280, check=False)
        run = (
            json.loads(done.stdout.strip().splitlines()[-1])
            if done.returncode == 0
            else {"error": done.stderr[-2000:]}
        )
        record["runs"].append(run)
        print(f"[{i}] {'error' if 'error' in run else len(run['rows'])}", flush=True)
        (out / "optimizer_paths.json").write_text(json.dumps(record, indent=1) + "\n")


def _line(points: list[tuple[int, float]], relative: bool = False) -> tuple[float, float]:
    """Least-squares intercept and slope (`relative`: each point weighted by 1/y^2)."""
    w = [1.0 / y**2 if relative else 1.0 for _, y in points]
    sw = sum(w)
    mx = sum(wi * x for wi, (x, _) in zip(w, points, strict=True)) / sw
    my = sum(wi * y for wi, (_, y) in zip(w, points, strict=True)) / sw
    sxy = sum(wi * (x - mx) * (y - my) for wi, (x, y) in zip(w, points, strict=True))
    sxx = sum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, points, strict=True))
    return my - sxy / sxx * mx, sxy / sxx


def lines(
    record: dict[str, Any], relative: bool = False
) -> dict[tuple[str, str], tuple[float, float]]:
    """(optimizer, path) -> (fixed us, us per tensor), over the median of the processes."""
    step = medians(record)
    return {
        (kind, path): _line([(n, step[kind, path, n]) for n in TENSORS], relative)
        for kind, paths in PATHS.items()
        for path in paths
    }


def medians(record: dict[str, Any]) -> dict[tuple[str, str, int], float]:
    """(optimizer, path, tensors) -> the median step over the processes, in us."""
    values: dict[tuple[str, str, int], list[float]] = {}
    for run in record["runs"]:
        for row in run.get("rows", ()):
            key = (row["optimizer"], row["path"], row["tensors"])
            values.setdefault(key, []).append(row["step_us"])
    return {key: statistics.median(found) for key, found in values.items()}


DEFAULT_PATH = {"adafactor": "for-loop"}
"""Each optimizer's path under PyTorch's defaults on CUDA (foreach where not named), the one
the shipped host costs were measured on."""
HOST_FIT = Path(__file__).parents[2] / "src/trainfit/timing/host_fit.json"


def record_ratios(directory: Path) -> dict[str, dict[str, list[float]]]:
    """Each optimizer's paths as [fixed, per tensor] ratios to its default path, written into
    host_fit.json's `optimizer_paths` (Adam's row is measured but trainfit times Adam as
    AdamW, so AdamW's ratios are the ones used for both)."""
    record = json.loads((directory / "optimizer_paths.json").read_text())
    found = lines(record, relative=True)
    ratios: dict[str, dict[str, list[float]]] = {}
    for kind, paths in PATHS.items():
        base = found[kind, DEFAULT_PATH.get(kind, "foreach")]
        ratios[kind] = {
            path: [
                round(found[kind, path][0] / base[0], 3),
                round(found[kind, path][1] / base[1], 3),
            ]
            for path in paths
        }
    host = json.loads(HOST_FIT.read_text())
    env = record["environment"]
    host["optimizer_paths"] = {
        "source": f"benchmarks/steptime/optimizer_paths.py record ({env['date']}, {env['device']}, "
        f"torch {env['torch']}; results/optimizer_paths_h100)",
        "ratios": ratios,
    }
    HOST_FIT.write_text(json.dumps(host, indent=1) + "\n")
    return ratios


def report(directory: Path) -> None:
    record = json.loads((directory / "optimizer_paths.json").read_text())
    host = json.loads((Path(__file__).parents[2] / "src/trainfit/timing/host_fit.json").read_text())
    shipped = host.get("optimizer_lines", {})
    env = record["environment"]
    dispatch = [round(r["dispatch_us"], 2) for r in record["runs"] if "dispatch_us" in r]
    out = [
        "# Optimizer step host cost by path (for-loop, foreach, fused)",
        "",
        f"Measured {env['date']} on {env['device']} ({env.get('nvidia_smi', '')}), torch "
        f"{env['torch']}, Python {env['python']}; {len(dispatch)} fresh processes; one "
        f"in-place add's dispatch per process: {', '.join(map(str, dispatch))} us. "
        f"{ELEMENTS} fp32 elements a tensor; generated by `optimizer_paths.py report`.",
        "",
        "| optimizer | path | "
        + " | ".join(f"{n} tensors us" for n in TENSORS)
        + " | fixed us | us per tensor | shipped line (foreach) |",
        "|---|---|" + "---:|" * (len(TENSORS) + 3),
    ]
    step = medians(record)
    for (kind, path), (fixed, per) in lines(record).items():
        cells = [f"{step[kind, path, n]:.0f}" for n in TENSORS]
        line = shipped.get(kind)
        ship = f"{line[0] * 1e6:.0f} + {line[1] * 1e6:.1f}" if line and path == "foreach" else ""
        out.append(
            f"| {kind} | {path} | " + " | ".join(cells) + f" | {fixed:.0f} | {per:.1f} | {ship} |"
        )
    (directory / "optimizer_paths.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--repeat", type=int, default=3)
    sub.add_parser("one")
    for name in ("report", "record"):
        sub.add_parser(name).add_argument("directory", type=Path)
    args = parser.parse_args()
    if args.what == "one":
        print(json.dumps(one_process()))
    elif args.what == "measure":
        measure(args.out, args.repeat)
    elif args.what == "record":
        print(json.dumps(record_ratios(args.directory), indent=1))
    else:
        report(args.directory)


if __name__ == "__main__":
    main()
