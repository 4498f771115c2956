"""Is a GEMM's fixed cost a time or a number of FLOPs? Device time of torch.mm per precision.

    PYTHONPATH=src:. python -m benchmarks.timing.gemm_fixed --out DIR

For fp32 (allow_tf32 False: CUDA cores), tf32, bf16 and fp16 (tensor cores), every shape is run
as a CUDA graph of `reps` back-to-back torch.mm calls into a preallocated output (no host launch
in the way), timed with CUDA events over 7 replays (median, min and max kept). Shapes: squares
64..8192 in both layouts (A @ B and A @ B.T, as nn.Linear calls it) and transformer-block shapes
(tokens x hidden x out). Writes `gemm_fixed_h100.json` (raw times, card, date, versions, the
GPU's clocks as nvidia-smi reads them) under DIR. The fit is benchmarks.timing.gemm_fixed_fit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

SQUARES = (64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
BLOCKS = [
    (tokens, hidden, out)
    for tokens in (256, 1024, 4096, 16384)
    for hidden in (768, 1024, 4096)
    for out in (hidden, 4 * hidden)
]
DTYPES = (
    ("fp32", torch.float32, False, 60e12),
    ("tf32", torch.float32, True, 400e12),
    ("bf16", torch.bfloat16, False, 700e12),
    ("fp16", torch.float16, False, 700e12),
)
REPLAYS = 7


def _smi(query: str) -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError as exc:
        return f"unavailable: {exc}"


def _time(m: int, k: int, n: int, dtype: torch.dtype, transposed: bool, rate: float) -> dict:
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = (
        torch.randn(n, k, device="cuda", dtype=dtype)
        if transposed
        else torch.randn(k, n, device="cuda", dtype=dtype)
    )
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    rhs = b.t() if transposed else b
    flops = 2 * m * k * n
    reps = int(min(200, max(3, 0.03 / (flops / rate + 4e-6))))
    for _ in range(5):
        torch.mm(a, rhs, out=c)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for _ in range(reps):
            torch.mm(a, rhs, out=c)
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPLAYS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0 / reps)
    del graph, a, b, c
    times.sort()
    return {
        "m": m,
        "k": k,
        "n": n,
        "layout": "a@b.T" if transposed else "a@b",
        "flops": flops,
        "reps": reps,
        "seconds": times[len(times) // 2],
        "seconds_min": times[0],
        "seconds_max": times[-1],
    }


def _empty_kernel_seconds() -> float:
    """Device seconds per back-to-back tiny kernel in a graph (the model's kernel_seconds)."""
    x = torch.zeros(1, device="cuda")
    reps = 200
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for _ in range(reps):
            x.add_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPLAYS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0 / reps)
    times.sort()
    return times[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    props = torch.cuda.get_device_properties(0)
    result: dict[str, Any] = {
        "environment": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(0),
            "sm_count": props.multi_processor_count,
            "capability": list(torch.cuda.get_device_capability(0)),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cublas": "bundled with torch",
            "python": sys.version.split()[0],
            "nvidia_smi": _smi("name,driver_version,memory.total"),
            "clocks_before": _smi("clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit"),
        },
        "method": "CUDA graph of reps back-to-back torch.mm(a, b, out=c); CUDA events around "
        f"each of {REPLAYS} replays; seconds = median replay time / reps",
        "empty_kernel_seconds": _empty_kernel_seconds(),
        "gemm": [],
    }
    shapes = [(s, s, s, t) for s in SQUARES for t in (False, True)]
    shapes += [(m, k, n, True) for m, k, n in BLOCKS]
    for name, dtype, tf32, rate in DTYPES:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for m, k, n, transposed in shapes:
            row = _time(m, k, n, dtype, transposed, rate)
            row["dtype"] = name
            result["gemm"].append(row)
        print(name, "done", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    result["environment"]["clocks_after"] = _smi(
        "clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gemm_fixed_h100.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
