"""fp32 cuDNN recurrent calls across sequence lengths: what a step costs in a training loop.

    PYTHONPATH=src:. python -m benchmarks.steptime.rnn_lengths --out DIR [--deadline S]   # GPU

`rnn_sizes.py` and `rnn_kernels.py` found where each pass leaves cuDNN's persistent kernel, at
one length (40 steps). Moving the model's bounds there (`trainfit.timing.kernels.stepped_fp32`)
mended the sixth blind set's LSTM at hidden 160 but put committed long-sequence steps over
(with the calibration's full stepped figure for every stepped pass: RNN_TANH at hidden 384 over
200 steps +68%, LSTM at 192 over 128 +48%): the stepped kernel's per-step figure, calibrated at
larger hidden sizes, overstates these calls per step. This
times, for LSTM, GRU and RNN_TANH at hidden sizes on either side of the bounds, batch 16 and
64, and 16-256 steps (one layer; two at 64 steps):

- the loop: forward then backward repeated 20 times between two CUDA events, no synchronize
  between them, as a training loop issues them (the median of 3 such windows, per iteration);
- the host: the wall time the 20 iterations took to issue (the same windows);
- the device: each pass's kernels under `torch.profiler` (summed durations and count, the
  median of 3).

Writes DIR/rnn_lengths.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.rnn_kernels import _kernels
from benchmarks.steptime.rnn_sizes import passes, write

SIZES = {"LSTM": (112, 160, 240, 384), "GRU": (144, 224, 320), "RNN_TANH": (256, 320, 512)}
BATCHES = (16, 64)
LENGTHS = (16, 32, 64, 128, 256)
WINDOW = 20


def _row(mode: str, hidden: int, batch: int, steps: int, layers: int) -> dict[str, Any]:
    import torch

    forward, backward = passes(mode, hidden, batch, steps, layers)
    loop, host = [], []
    for _ in range(3):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began = time.perf_counter()
        start.record()
        for _ in range(WINDOW):
            forward()
            backward()
        host.append((time.perf_counter() - began) / WINDOW * 1e3)
        end.record()
        end.synchronize()
        loop.append(start.elapsed_time(end) / WINDOW)
    row: dict[str, Any] = dict(mode=mode, hidden=hidden, batch=batch, steps=steps, layers=layers)
    row["loop_ms"], row["host_ms"] = statistics.median(loop), statistics.median(host)
    for name, fn in (("forward", forward), ("backward", backward)):
        found = []
        for _ in range(3):
            if name == "backward":
                forward()
            found.append(_kernels(fn))
        row[f"{name}_us"] = statistics.median(f[0] for f in found)
        row[f"{name}_kernels"] = found[-1][1]
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=300.0)
    args = parser.parse_args()

    began = time.monotonic()
    grid = [
        (mode, hidden, batch, steps, 1)
        for mode, sizes in SIZES.items()
        for hidden in sizes
        for batch in BATCHES
        for steps in LENGTHS
    ]
    grid += [
        (mode, hidden, batch, 64, 2)
        for mode, sizes in SIZES.items()
        for hidden in sizes
        for batch in BATCHES
    ]
    rows = []
    for config in grid:
        if time.monotonic() - began > args.deadline:
            break
        rows.append(_row(*config))
        print(rows[-1], flush=True)
    write(args.out / "rnn_lengths.json", rows)


if __name__ == "__main__":
    main()
