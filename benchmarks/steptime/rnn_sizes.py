"""fp32 cuDNN recurrent calls across hidden sizes and batches: forward and backward device time.

    PYTHONPATH=src:. python -m benchmarks.steptime.rnn_sizes --out DIR [--deadline S]   # GPU

The sixth blind set's worst miss was an fp32 two-layer LSTM at hidden 160 (predicted 2.67 ms a
step, 3.96-5.07 ms on four H100 machines), and protocol_study's calls (batch 16, 40 steps)
found hidden 160 slower backward than 192 or 256 for both LSTM and GRU: the model's per-step
cost, a line in the log of the recurrent weight's size between the persistent kernel's and the
stepped one's (`trainfit.timing.kernels.rnn_step_seconds`), cannot give that. This times one
layer (input 128, 40 steps, batch_first) of each mode at hidden 96-384 and batch 8, 24 and 64:
each call after a synchronize between CUDA events, the median of 15 (after 3 warm-up
iterations), forward and backward apart. Writes DIR/rnn_sizes.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODES = ("LSTM", "GRU", "RNN_TANH")
HIDDEN = (96, 128, 144, 160, 176, 192, 208, 224, 256, 288, 320, 384)
BATCHES = (8, 24, 64)
STEPS = 40


def passes(
    mode: str, hidden: int, batch: int, steps: int = STEPS, layers: int = 1
) -> tuple[Callable[[], None], Callable[[], None]]:
    """`layers` layers of `mode` (input 128, `steps` steps, batch_first) on CUDA at `hidden`
    and `batch`: its forward and its backward (of the last forward) as calls, warmed up (3
    iterations)."""
    import torch
    from torch import nn

    if mode == "RNN_TANH":
        layer: Any = nn.RNN(128, hidden, layers, batch_first=True)
    else:
        layer = {"LSTM": nn.LSTM, "GRU": nn.GRU}[mode](128, hidden, layers, batch_first=True)
    x = torch.randn(batch, steps, 128, device="cuda", requires_grad=True)
    return warmed(layer.cuda(), x)


def warmed(layer: Any, x: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    """`layer`'s forward on `x` and its backward (of the last forward, against ones) as calls,
    warmed up (3 iterations)."""
    import torch

    held: dict[str, Any] = {}

    def forward() -> None:
        held["y"] = layer(x)[0]

    def backward() -> None:
        held["y"].backward(held["grad"])

    forward()
    held["grad"] = torch.ones_like(held["y"])
    for _ in range(3):
        forward()
        backward()
    return forward, backward


def _row(mode: str, hidden: int, batch: int) -> dict[str, Any]:
    import torch

    forward, backward = passes(mode, hidden, batch)
    times: dict[str, list[float]] = {"forward": [], "backward": []}
    for _ in range(15):
        for name, fn in (("forward", forward), ("backward", backward)):
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    return {
        "mode": mode,
        "hidden": hidden,
        "batch": batch,
        "steps": STEPS,
        "forward_ms": statistics.median(times["forward"]),
        "backward_ms": statistics.median(times["backward"]),
    }


def run_grid(name: str, row: Callable[[str, int, int], dict[str, Any]]) -> None:
    """`row(mode, hidden, batch)` over the grid (modes, batches, hidden sizes) until the
    deadline, each printed without its lists, written to `--out`/`name` with the
    environment."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=240.0)
    args = parser.parse_args()

    began = time.monotonic()
    rows = []
    for mode in MODES:
        for batch in BATCHES:
            for hidden in HIDDEN:
                if time.monotonic() - began > args.deadline:
                    break
                rows.append(row(mode, hidden, batch))
                print({k: v for k, v in rows[-1].items() if not isinstance(v, list)}, flush=True)
    write(args.out / name, rows)


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` and the GPU's environment as JSON at `path` (its folder made)."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "environment": {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
        },
        "rows": rows,
    }
    path.write_text(json.dumps(record, indent=1))


def main() -> None:
    run_grid("rnn_sizes.json", _row)


if __name__ == "__main__":
    main()
