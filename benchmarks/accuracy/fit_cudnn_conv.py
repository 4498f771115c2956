"""Fit and check cuDNN's convolution workspace rules on the H100 probe grid.

    PYTHONPATH=src:. python -m benchmarks.accuracy.fit_cudnn_conv [--probe FILE]

Reads results/cudnn_probe_h100.json.gz (`probe_cudnn.py`: 600 random convolutions, none at an
accuracy case's shape or batch) and splits each call's allocator events into the forward
workspace (allocated and freed at once after the output), the input-gradient workspace (after
the input's gradient) and the weight-gradient workspace (after the weight's gradient). Prints
the one constant it fits (`WEIGHT_GRAD_SPLIT`, the median ratio of the weight-gradient
workspace to the transform size) and the per-call error of every rule in
`trainfit.trace.kernels.cudnn_conv`, by kind of convolution. The accuracy cases are never read,
unless
`--probe` names a probe of their shapes (`probe_case_convs.py`), which is then only reported.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from trainfit.trace import cudnn_conv
from trainfit.trace.kernels.cudnn_conv import (
    ConvShape,
    forward_workspace_bytes,
    input_grad_workspace_bytes,
    weight_grad_workspace_bytes,
)

RESULTS = Path(__file__).parent / "results"
FWD_MARK, BWD_MARK = 777, 779
SMALL = 64 << 10
"""Workspaces under 64 KiB count as none (they move no segment)."""
BIG = 1 << 20
"""Size errors are reported over calls whose measured workspace is at least 1 MiB."""


def _transients(events: list[list[Any]]) -> list[tuple[int, int]]:
    """(size, size of the last lasting allocation before it) of each alloc freed at once."""
    out: list[tuple[int, int]] = []
    last = 0
    for j, (action, size, addr) in enumerate(events):
        if action != "a":
            continue
        nxt = events[j + 1] if j + 1 < len(events) else None
        if nxt is not None and nxt[0] == "f" and nxt[2] == addr:
            out.append((size, last))
        else:
            last = size
    return out


def load(path: Path = RESULTS / "cudnn_probe_h100.json.gz") -> list[dict[str, Any]]:
    """Every probed convolution: its ConvShape and measured workspaces (0 where none)."""
    with gzip.open(path, "rt") as fh:
        record = json.load(fh)
    rows = []
    for r in record["conv"]:
        if "error" in r:
            continue
        el = 4 if r["dtype"] == "float32" else 2
        x, w, groups = r["x"], r["w"], r["groups"]
        k = w[2:]
        pairs = zip(x[2:], r["padding"], k, r["stride"], strict=True)
        if r["transposed"]:
            out_ch = w[1] * groups
            out = [(s - 1) * st - 2 * p + kk for s, p, kk, st in pairs]
        else:
            out_ch = w[0]
            out = [(s + 2 * p - kk) // st + 1 for s, p, kk, st in pairs]
        shape = ConvShape(
            batch=x[0], in_channels=x[1], input_numel=math.prod(x),
            output_numel=x[0] * out_ch * math.prod(out), weight_shape=tuple(w),
            stride=tuple(r["stride"]), padding=tuple(r["padding"]), groups=groups,
            transposed=r["transposed"], element=el,
        )  # fmt: skip
        ev = r["events"]
        i1 = next(i for i, e in enumerate(ev) if e[0] == "a" and e[1] == FWD_MARK)
        i2 = next(i for i, e in enumerate(ev) if e[0] == "a" and e[1] == BWD_MARK)
        xb, wb = el * math.prod(x), el * math.prod(w)
        back = _transients(ev[i1 + 2 : i2])
        rows.append(
            dict(
                shape=shape,
                input_grad=r["input_grad"],
                forward=max((s for s, _ in _transients(ev[:i1])), default=0),
                input_grad_ws=max((s for s, last in back if last == xb), default=0),
                weight_grad_ws=max((s for s, last in back if last == wb), default=0),
            )
        )
    return rows


def _kind(s: ConvShape) -> str:
    return "depthwise" if s.depthwise else "pointwise" if s.pointwise else "dense"


def _report(label: str, pairs: list[tuple[int, int]]) -> None:
    measured = np.array([m for m, _ in pairs], dtype=float)
    predicted = np.array([p for _, p in pairs], dtype=float)
    none_agree = np.mean((measured < SMALL) == (predicted < SMALL))
    big = measured >= BIG
    line = f"  {label:28s} {len(pairs):4d} calls, none-or-not agrees {none_agree:4.0%}"
    if big.any():
        rel = predicted[big] / measured[big] - 1
        line += (
            f"; {big.sum():3d} over 1 MiB: median |error| {np.median(np.abs(rel)):4.0%}, "
            f"within 5% {np.mean(np.abs(rel) < 0.05):4.0%}, within 20% "
            f"{np.mean(np.abs(rel) < 0.2):4.0%}, max {rel.min():+.0%}/{rel.max():+.0%}"
        )
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", type=Path, default=RESULTS / "cudnn_probe_h100.json.gz")
    rows = load(parser.parse_args().probe)
    print(f"{len(rows)} probed convolutions")
    ratios = []
    for r in rows:
        s = r["shape"]
        if _kind(s) == "dense" and r["weight_grad_ws"] >= BIG:
            ratios.append(r["weight_grad_ws"] / cudnn_conv._transform_bytes(s))
    print(
        f"weight-gradient workspace / transform size, {len(ratios)} dense calls over 1 MiB: "
        f"median {np.median(ratios):.3f} (WEIGHT_GRAD_SPLIT = {cudnn_conv.WEIGHT_GRAD_SPLIT})"
    )
    table: dict[str, list[tuple[int, int]]] = defaultdict(list)
    rules = (
        ("forward", "forward", forward_workspace_bytes),
        ("input grad", "input_grad_ws", input_grad_workspace_bytes),
        ("weight grad", "weight_grad_ws", weight_grad_workspace_bytes),
    )
    for r in rows:
        s = r["shape"]
        for label, key, rule in rules:
            if key == "input_grad_ws" and not r["input_grad"]:
                continue
            table[f"{_kind(s)} {label}"].append((r[key], rule(s)))
            table[f"all {label}"].append((r[key], rule(s)))
    for label in sorted(table):
        _report(label, table[label])


if __name__ == "__main__":
    main()
