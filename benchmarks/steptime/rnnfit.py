"""What a cuDNN recurrent call adds per layer beside its steps, read off `diagnose2.py`'s rows.

    PYTHONPATH=src:. python -m benchmarks.steptime.rnnfit [--write]

Rows: `results/diagnose2_h100/diagnose2.json`, part `rnn`, the layer timed alone (CUDA events
after a sync): GRU and LSTM, 1-4 layers, hidden 192 and 512, batch 32, 64 time steps, fp32 and
bf16, 3 fresh-process repeats. Per configuration the median over the repeats, then the
least-squares line over layers 1-4 (intercept + slope x layers). Used: the six configurations
that run the stepped kernels (bf16 at both hiddens, fp32 at hidden 512); fp32 at hidden 192
(the persistent kernel forward) is left out. The figure, per pass: the median slope less the
calibration grid's stepped kernel over the 64 steps (`calibration.json`'s
`lstm_step_seconds`), so that a call costs its steps plus this per layer. diagnose2 varied the
layers at one length (64 steps): it cannot tell a per-layer fixed cost from a dearer step; the
faithful steps (256 steps, hidden 512) ran at the grid's per-step figure, so the extra is taken
as per layer. `--write` puts it in `host_fit.json` (`rnn_layer_seconds`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.steptime.diagnose2_report import RAW, _groups, _line
from trainfit.timing.constants import calibration

HOST_FIT = Path(__file__).parents[2] / "src" / "trainfit" / "timing" / "host_fit.json"


def slopes() -> dict[tuple[str, str, int], tuple[float, float]]:
    """(mode, dtype, hidden) -> (forward, backward) seconds per layer per time step."""
    record = json.loads(RAW.read_text())
    groups = _groups(record, "rnn", lambda r: (r["mode"], r["dtype"], r["hidden"], r["layers"]))
    out: dict[tuple[str, str, int], tuple[float, float]] = {}
    configs = sorted({key[:3] for key in groups})
    for config in configs:
        layers = sorted(k[3] for k in groups if k[:3] == config)
        steps = {groups[(*config, n)][0]["steps"] for n in layers}
        (seq,) = steps
        per = []
        for field in ("forward_ms", "backward_ms"):
            ys = [statistics.median(r[field] for r in groups[(*config, n)]) for n in layers]
            per.append(_line([float(n) for n in layers], ys)[1] / 1e3 / seq)
        out[config] = (per[0], per[1])
    return out


def fit(seq: int = 64) -> dict[str, float]:
    """Seconds a stepped call adds per layer beside its `seq` steps, forward and backward."""
    grid = calibration().lstm_step_seconds["stepped"]
    stepped = [v for (_, dtype, hidden), v in slopes().items() if dtype == "bf16" or hidden > 256]
    return {
        which: round(statistics.median(v[i] for v in stepped) * seq - grid[which] * seq, 9)
        for i, which in enumerate(("forward", "backward"))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"write into {HOST_FIT.name}")
    args = parser.parse_args()
    for (mode, dtype, hidden), (fwd, bwd) in slopes().items():
        print(f"{mode} {dtype} h{hidden}: forward {fwd * 1e6:.1f} us, backward {bwd * 1e6:.1f} us")
    figures = fit()
    fwd, bwd = figures["forward"] * 1e3, figures["backward"] * 1e3
    print(f"per layer: forward {fwd:.3f} ms, backward {bwd:.3f} ms")
    if args.write:
        record = json.loads(HOST_FIT.read_text())
        record["rnn_layer_seconds"] = figures
        HOST_FIT.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
