"""Microbenchmarks of this CPU for the CPU step-time model (`trainfit.timing.cpu`).

    PYTHONPATH=src:. python -m benchmarks.accuracy_cpu.calibrate_time          # ~2 minutes

Runs PyTorch on one thread and times each call in this process's CPU time, the fastest of
several after a warm-up call. The machine is shared with other work: a call's wall time, and
any multi-threaded op's (whose threads wait for each other at a barrier while one of them is
descheduled), depend on the load; one thread's CPU time hardly does. The model scales the
GEMM rates to more threads (`trainfit.timing.cpu`). It measures:
- GEMM rates (`torch.mm`) over a range of sizes, per class: fp32; the half dtype this CPU runs
  natively (bf16 with avx512_bf16/amx_bf16), and the one it emulates (fp16 without
  avx512_fp16/amx_fp16), whichever exist here;
- elementwise rates (`torch.mul` into a new tensor: two reads, one write) from 4 KiB to
  384 MiB, fp32 and bf16;
- 3x3 convolution rates (forward, and backward for the input and weight gradients) over a
  range of shapes, fp32 and native bf16;
- a view's cost (`Tensor.view`) and an empty `nn.Module` call's.
Writes `src/trainfit/timing/cpu_calibration.json` (keeping its fitted `backward_op_seconds`,
which `fit_time.py` sets from real steps of the calibration models).
The load average (the highest seen before and after) is recorded with the figures.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainfit.hardware.cpu_features import HalfSupport, cpu_features

OUT = Path(__file__).parents[2] / "src" / "trainfit" / "timing" / "cpu_calibration.json"

GEMMS = [
    (16, 64, 64), (16, 256, 256), (64, 256, 256), (64, 768, 768), (64, 768, 3072),
    (256, 768, 768), (512, 1024, 1024), (1024, 1024, 1024), (1024, 2048, 2048),
]  # fmt: skip
"""(M, K, N): 2*M*K*N FLOPs from 1.3e5 to 8.6e9."""
EMULATED_MAX_FLOPS = 3e8
"""The emulated GEMM runs at ~1 GFLOP/s: larger sizes are skipped."""
ELEMENTS = [1 << p for p in range(10, 27, 2)]  # 1 Ki .. 64 Mi elements
CONVS = [
    (16, 3, 64, 32, 1), (16, 32, 64, 64, 2), (16, 64, 32, 128, 2), (16, 128, 16, 128, 1),
    (8, 64, 56, 64, 1), (8, 256, 14, 256, 1), (4, 128, 28, 128, 1), (32, 16, 32, 32, 1),
]  # fmt: skip
"""(batch, in channels, height = width, out channels, stride) of 3x3 convolutions, padding 1."""


def _best_seconds(fn: Any, budget: float = 1.0, most: int = 50) -> float:
    fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (spent < budget and len(times) < most):
        start = time.process_time()
        fn()
        t = time.process_time() - start
        times.append(t)
        spent += t
    return min(times)


def gemm_curve(dtype: torch.dtype, limit: float = float("inf")) -> list[list[float]]:
    out = []
    for m, k, n in GEMMS:
        flops = 2 * m * k * n
        if flops > limit:
            continue
        a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        out.append([float(flops), flops / _best_seconds(lambda a=a, b=b: torch.mm(a, b))])
    return out


def memory_curve(dtype: torch.dtype) -> list[list[float]]:
    out = []
    for n in ELEMENTS:
        a, b = torch.randn(n).to(dtype), torch.randn(n).to(dtype)
        moved = 3 * n * a.element_size()
        out.append([float(moved), moved / _best_seconds(lambda a=a, b=b: torch.mul(a, b))])
    return out


def conv_curves(dtype: torch.dtype) -> dict[str, list[list[float]]]:
    """(FLOPs, FLOP/s) of 3x3 convolutions: forward, and backward (input and weight grads,
    twice the forward's FLOPs), each sorted by FLOPs."""
    forward, backward = [], []
    for n, cin, hw, cout, stride in CONVS:
        x = torch.randn(n, cin, hw, hw).to(dtype)
        w = torch.randn(cout, cin, 3, 3).to(dtype)
        y = torch.nn.functional.conv2d(x, w, None, stride, 1)
        flops = 2 * y.numel() * cin * 9
        grad = torch.randn_like(y)

        def fwd(x=x, w=w, stride=stride) -> None:
            torch.nn.functional.conv2d(x, w, None, stride, 1)

        def bwd(x=x, w=w, grad=grad, stride=stride) -> None:
            torch.ops.aten.convolution_backward(
                grad, x, w, None, [stride] * 2, [1, 1], [1, 1], False, [0, 0], 1,
                [True, True, False],
            )  # fmt: skip

        forward.append([float(flops), flops / _best_seconds(fwd)])
        backward.append([float(2 * flops), 2 * flops / _best_seconds(bwd)])
    return {"forward": sorted(forward), "backward": sorted(backward)}


def host_seconds() -> tuple[float, float]:
    x = torch.randn(8, 8)
    module = nn.Module()
    module.forward = lambda t: t  # type: ignore[method-assign]
    reps = 2000

    def views() -> None:
        for _ in range(reps):
            x.view(64)

    def calls() -> None:
        for _ in range(reps):
            module(x)

    return _best_seconds(views) / reps, _best_seconds(calls) / reps


def main() -> None:
    torch.set_num_threads(1)
    features = cpu_features()
    load = list(os.getloadavg())
    curves = {"fp32": gemm_curve(torch.float32)}
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        support = features.half_support(name)
        if support is HalfSupport.NATIVE and "native" not in curves:
            curves["native"] = gemm_curve(dtype)
        if support is HalfSupport.EMULATED and "emulated" not in curves:
            curves["emulated"] = gemm_curve(dtype, EMULATED_MAX_FLOPS)
    memory = {"fp32": memory_curve(torch.float32), "bf16": memory_curve(torch.bfloat16)}
    convs = {"fp32": conv_curves(torch.float32)}
    if features.half_support("bf16") is HalfSupport.NATIVE:
        convs["native"] = conv_curves(torch.bfloat16)
    view, call = host_seconds()
    load = [max(a, b) for a, b in zip(load, os.getloadavg(), strict=True)]
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    record = {
        "host": {
            "model": features.model,
            "cores": features.cores,
            "threads": features.threads,
            "clock_mhz": features.clock_mhz,
            "simd_lanes": features.simd_lanes,
            "peak_fp32_flops": features.peak_fp32_flops,
            "flags": sorted(f for f in features.flags if f.startswith(("avx", "amx", "fma"))),
            "half_support": {d: features.half_support(d).value for d in ("bf16", "fp16")},
        },
        "date": datetime.date.today().isoformat(),
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
        "source": "benchmarks/accuracy_cpu/calibrate_time.py",
        "load_average": [round(x, 2) for x in load],
        "gemm_curve": {k: [[f, round(r, 1)] for f, r in v] for k, v in curves.items()},
        "memory_curve": {k: [[b, round(r, 1)] for b, r in v] for k, v in memory.items()},
        "conv_source": {"date": datetime.date.today().isoformat(), "load_average": load},
        "conv_curve": {
            k: {side: [[f, round(r, 1)] for f, r in pts] for side, pts in v.items()}
            for k, v in convs.items()
        },
        "host_op_seconds": view,
        "module_call_seconds": call,
        "backward_op_seconds": old.get("backward_op_seconds", 0.0),
        "fitted_on": old.get("fitted_on", []),
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: record[k] for k in ("host", "load_average")}, indent=1))
    for k, v in curves.items():
        print(k, [f"{f:.1e}:{r / 1e9:.1f}G" for f, r in v])
    for k, v in memory.items():
        print(k, [f"{b:.1e}:{r / 1e9:.1f}G" for b, r in v])
    for k, v in convs.items():
        for side, pts in v.items():
            print("conv", k, side, [f"{f:.1e}:{r / 1e9:.1f}G" for f, r in pts])
    print(f"view {view * 1e6:.2f} us, module call {call * 1e6:.2f} us")


if __name__ == "__main__":
    main()
