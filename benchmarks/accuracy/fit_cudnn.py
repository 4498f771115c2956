"""Fit cuDNN's LSTM workspace size on the probe grids; check the reserve-space formula.

    PYTHONPATH=src:. python -m benchmarks.accuracy.fit_cudnn

Reads results/cudnn_probe_h100.json.gz (`probe_cudnn.py`) and results/cudnn_lstm_grid_h100.json.gz
(an earlier LSTM grid: `cfg` = input, hidden, layers, batch, time, dropout, bidirectional, dtype;
`ev` = the events). Prints the coefficients that `trainfit.trace.kernels.cudnn_rnn` uses and each
point's leave-one-out error. The accuracy case's shape (B32 T256 I=H=256 L4) is left out of
the fit, so that `lstm-cudnn-fp32` stays held out.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np

from trainfit.trace.kernels.cudnn_rnn import LstmShape, reserve_bytes

RESULTS = Path(__file__).parent / "results"
CASE = (256, 256, 4, 32, 256)  # input, hidden, layers, batch, time of lstm-cudnn-fp32


def _forward_allocs(events: list[list[object]]) -> list[int]:
    end = next(i for i, e in enumerate(events) if e[0] == "a" and e[1] == 777)
    return [int(e[1]) for e in events[:end] if e[0] == "a"]  # type: ignore[call-overload]


def load() -> list[dict[str, object]]:
    """Every probed LSTM: its shape, reserve and forward workspace."""
    rows = []
    with gzip.open(RESULTS / "cudnn_lstm_grid_h100.json.gz", "rt") as fh:
        for r in json.load(fh)["lstm"]:
            i, h, layers, b, t, p, bi, dt = r["cfg"]
            el = 2 if dt != "None" else 4
            rows.append(dict(cfg=(i, h, layers, b, t, p), d=2 if bi else 1, el=el, ev=r["ev"]))
    with gzip.open(RESULTS / "cudnn_probe_h100.json.gz", "rt") as fh:
        for r in json.load(fh)["rnn"]:
            if r["mode"] == "LSTM":
                el = 4 if r["dtype"] == "float32" else 2
                d = 2 if r["bi"] else 1
                rows.append(dict(cfg=tuple(r["cfg"]), d=d, el=el, ev=r["events"]))
    for row in rows:
        allocs = _forward_allocs(row["ev"])  # type: ignore[arg-type]
        row["reserve"], row["workspace"] = allocs[-1], allocs[-2]
    return rows


def _features(cfg: tuple[int, ...]) -> list[float]:
    i, h, layers, b, t, p = cfg
    logs = [math.log(v) for v in (b, t, h, layers, i)]
    return [1.0, *logs, float(p > 0)]


def main() -> None:
    rows = load()
    exact = 0
    for r in rows:
        i, h, layers, b, t, p = r["cfg"]  # type: ignore[misc]
        shape = LstmShape(
            input_size=i, hidden=h, layers=layers, directions=r["d"], seq=t, batch=b,
            element=r["el"], dropout=p,
        )  # fmt: skip
        exact += reserve_bytes(shape) == r["reserve"]
    print(f"reserve formula exact on {exact} of {len(rows)} LSTMs")
    fit = [r for r in rows if r["d"] == 1 and r["el"] == 4]
    x = np.array([_features(r["cfg"]) for r in fit])  # type: ignore[arg-type]
    y = np.log([r["workspace"] for r in fit])
    train = np.array([tuple(r["cfg"][:5]) != CASE for r in fit])  # type: ignore[index]
    coef, *_ = np.linalg.lstsq(x[train], y[train], rcond=None)
    print("log c0, exponents (batch, seq, hidden, layers, input), dropout:", np.round(coef, 4))
    errors = []
    for k, r in enumerate(fit):
        mask = train.copy()
        mask[k] = False
        c, *_ = np.linalg.lstsq(x[mask], y[mask], rcond=None)
        err = math.exp(x[k] @ c - y[k]) - 1
        errors.append(abs(err))
        tag = "  (the accuracy case, held out)" if not train[k] else ""
        print(f"  {r['cfg']}: {r['workspace'] / 2**20:7.1f} MiB, leave-one-out {err:+.0%}{tag}")
    print(f"leave-one-out |error|: median {np.median(errors):.0%}, max {max(errors):.0%}")
    for key, label in (("d", "bidirectional"), ("el", "half precision")):
        ratios = []
        for r in rows:
            other = "el" if key == "d" else "d"
            if r[key] == 2 and (r[other] == (4 if other == "el" else 1)):
                twin = next(q for q in fit if q["cfg"] == r["cfg"])
                ratios.append(r["workspace"] / twin["workspace"])  # type: ignore[operator]
        ratio = np.median(ratios)
        print(f"{label} / fp32 one direction: median {ratio:.2f}, {np.round(sorted(ratios), 2)}")


if __name__ == "__main__":
    main()
