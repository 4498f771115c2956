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

import statistics
from collections import Counter
from typing import Any

from benchmarks.steptime.rnn_sizes import STEPS, passes, run_grid

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
    forward, backward = passes(mode, hidden, batch)
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
    run_grid("rnn_kernels.json", _row)


if __name__ == "__main__":
    main()
