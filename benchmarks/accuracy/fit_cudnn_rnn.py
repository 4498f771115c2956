"""Check cuDNN's GRU and RNN reserve-space formula and fit their workspace on the probe grid.

    PYTHONPATH=src:. python -m benchmarks.accuracy.fit_cudnn_rnn

Reads results/cudnn_probe_h100.json.gz (`probe_cudnn.py`: 7 GRU and 7 RNN rows, fp32, tanh,
one bidirectional each). For each row: the reserve space (the forward pass's last allocation)
against `reserve_bytes`, and the workspace (the one before it) over the LSTM fit's at the same
shape; the median of those ratios is each mode's `workspace_ratio`, and each row's error with
it is printed.
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

from trainfit.trace.kernels.cudnn_rnn import RnnMode, RnnShape, reserve_bytes, workspace_bytes

RESULTS = Path(__file__).parent / "results"
_MODES = {"GRU": RnnMode.GRU, "RNN": RnnMode.RNN_TANH}  # nn.RNN's default is tanh


def _forward_allocs(events: list[list[object]]) -> list[int]:
    end = next(i for i, e in enumerate(events) if e[0] == "a" and e[1] == 777)
    return [int(e[1]) for e in events[:end] if e[0] == "a"]  # type: ignore[call-overload]


def load() -> list[tuple[RnnShape, int, int]]:
    """Every probed GRU and RNN: (shape, reserve, forward workspace)."""
    rows = []
    with gzip.open(RESULTS / "cudnn_probe_h100.json.gz", "rt") as fh:
        for r in json.load(fh)["rnn"]:
            if r["mode"] not in _MODES:
                continue
            i, h, layers, b, t, p = r["cfg"]
            shape = RnnShape(
                mode=_MODES[r["mode"]], input_size=i, hidden=h, layers=layers,
                directions=2 if r["bi"] else 1, seq=t, batch=b,
                element=4 if r["dtype"] == "float32" else 2, dropout=p,
            )  # fmt: skip
            allocs = _forward_allocs(r["events"])
            rows.append((shape, allocs[-1], allocs[-2]))
    return rows


def main() -> None:
    rows = load()
    exact = sum(reserve_bytes(s) == reserve for s, reserve, _ in rows)
    print(f"reserve formula exact on {exact} of {len(rows)} GRUs and RNNs")
    for mode in (RnnMode.GRU, RnnMode.RNN_TANH):
        mine = [(s, ws) for s, _, ws in rows if s.mode is mode]
        lstm = [workspace_bytes(RnnShape(**{**_fields(s), "mode": RnnMode.LSTM})) for s, _ in mine]
        ratios = [ws / fit for (_, ws), fit in zip(mine, lstm, strict=True)]
        print(f"{mode.value}: workspace / LSTM fit, median {statistics.median(ratios):.2f}")
        for s, ws in mine:
            err = workspace_bytes(s) / ws - 1
            print(
                f"  I{s.input_size} H{s.hidden} L{s.layers} B{s.batch} T{s.seq} p{s.dropout} "
                f"D{s.directions}: {ws / 2**20:6.1f} MiB, error {err:+.0%}"
            )


def _fields(s: RnnShape) -> dict[str, object]:
    return {name: getattr(s, name) for name in RnnShape.__slots__}  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
