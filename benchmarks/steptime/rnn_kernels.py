"""fp32 cuDNN recurrent calls across hidden sizes: the device's kernel time per pass, alone.

    PYTHONPATH=src:. python -m benchmarks.steptime.rnn_kernels --out DIR   # GPU

`rnn_sizes.py` timed each pass between CUDA events, which bracket the host's issue of the call
too. This reads the kernels themselves: each pass of one layer (input 128, 40 steps,
batch_first) of LSTM, GRU and RNN_TANH at hidden 96-384 and batch 8, 24 and 64 runs 5 times
under `torch.profiler` (CUDA activity), and a pass's device time is the sum of the durations of
the kernels it launched (the median over the 5), with their count and the names of the two
longest. Writes DIR/rnn_kernels.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.steptime.rnn_sizes import BATCHES, HIDDEN, MODES, STEPS

REPEATS = 5


def _kernels(fn: Any) -> tuple[float, int, list[str]]:
    """Device microseconds of the kernels `fn` launches, their count and the longest two."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type.name == "CUDA"]
    total: Counter[str] = Counter()
    for e in events:
        total[e.name] += e.time_range.elapsed_us()
    return sum(total.values()), len(events), [n for n, _ in total.most_common(2)]


def _row(mode: str, hidden: int, batch: int) -> dict[str, Any]:
    import torch
    from torch import nn

    if mode == "RNN_TANH":
        layer: Any = nn.RNN(128, hidden, 1, batch_first=True)
    else:
        layer = {"LSTM": nn.LSTM, "GRU": nn.GRU}[mode](128, hidden, 1, batch_first=True)
    layer = layer.cuda()
    x = torch.randn(batch, STEPS, 128, device="cuda", requires_grad=True)
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
    row: dict[str, Any] = {"mode": mode, "hidden": hidden, "batch": batch, "steps": STEPS}
    for name in ("forward", "backward"):
        runs = []
        for _ in range(REPEATS):
            if name == "backward":
                forward()
            runs.append(_kernels(forward if name == "forward" else backward))
        row[f"{name}_us"] = statistics.median(r[0] for r in runs)
        row[f"{name}_kernels"] = runs[-1][1]
        row[f"{name}_top"] = runs[-1][2]
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=240.0)
    args = parser.parse_args()
    import torch

    began = time.monotonic()
    rows = []
    for mode in MODES:
        for batch in BATCHES:
            for hidden in HIDDEN:
                if time.monotonic() - began > args.deadline:
                    break
                rows.append(_row(mode, hidden, batch))
                print({k: v for k, v in rows[-1].items() if not k.endswith("_top")}, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
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
    (args.out / "rnn_kernels.json").write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
