"""cuDNN's stepped recurrent kernel's cost per time step and layer, read off `diagnose2.py`'s rows.

    PYTHONPATH=src:. python -m benchmarks.steptime.rnnfit [--write]

Rows: `results/diagnose2_h100/diagnose2.json`, part `rnn`, the layer timed alone (CUDA events
after a sync): GRU and LSTM, 1-4 layers, hidden 192 and 512, batch 32, 64 time steps, fp32 and
bf16, 3 fresh-process repeats. Per configuration the median over the repeats, then the
least-squares line over layers 1-4 (intercept + slope x layers); a layer's cost per time step
is the slope over the time steps. Forward: the configurations that run the stepped kernels
(bf16 at both hiddens, fp32 at hidden 512; fp32 at hidden 192 runs the persistent kernel
forward, 0.40-0.55 ms a layer, and is left out). Backward: all eight (fp32 hidden 192 included:
its backward is as dear a layer as the stepped ones'). The figure is the median of those
slopes over the steps. `--write` puts it in `host_fit.json` (`rnn_step_seconds`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.steptime.diagnose2_report import RAW, _groups, _line

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


def fit() -> dict[str, float]:
    """The stepped kernel's forward and backward seconds per time step and layer."""
    rows = slopes()
    stepped = [v[0] for (_, dtype, hidden), v in rows.items() if dtype == "bf16" or hidden > 256]
    return {
        "forward": round(statistics.median(stepped), 9),
        "backward": round(statistics.median(v[1] for v in rows.values()), 9),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"write into {HOST_FIT.name}")
    args = parser.parse_args()
    for (mode, dtype, hidden), (fwd, bwd) in slopes().items():
        print(f"{mode} {dtype} h{hidden}: forward {fwd * 1e6:.1f} us, backward {bwd * 1e6:.1f} us")
    figures = fit()
    fwd, bwd = figures["forward"] * 1e6, figures["backward"] * 1e6
    print(f"fit: forward {fwd:.2f} us, backward {bwd:.2f} us")
    if args.write:
        record = json.loads(HOST_FIT.read_text())
        record["rnn_step_seconds"] = figures
        HOST_FIT.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
