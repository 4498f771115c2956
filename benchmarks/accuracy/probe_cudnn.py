"""Probe what cuDNN allocates through PyTorch's caching allocator, on a grid of shapes.

    PYTHONPATH=src python -m benchmarks.accuracy.probe_cudnn --out DIR [--seconds 200]

Writes DIR/cudnn_probe.json: for each convolution and each RNN of a seeded grid, the allocator
events (alloc/free, bytes, address) of one steady-state forward and backward, split at marker
allocations. trainfit's cuDNN models (`trainfit.trace.kernels.cudnn_conv`,
`trainfit.trace.kernels.cudnn_rnn`)
are fitted on this grid, never on the accuracy cases: the grid is drawn at random and every
shape that one of the accuracy cases runs is excluded (`CASE_CONVS`).

Only the convolution or RNN runs between the markers, so every event between them is cuDNN's
or its PyTorch wrapper's: outputs, contiguous copies, workspaces, reserve space.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

FWD_MARK = 777
BWD_MARK = 779

# (x shape, w shape, stride, transposed, groups) of the convolutions the accuracy cases run
# (resnet-50 at batch 64; vq-ae at batch 128 and 64; redimnet at 64; the user convnet at 128):
# the grid leaves these out so that the cases stay held out.
CASE_CONVS: frozenset[tuple[Any, ...]] = frozenset(
    {
        ((128, 1, 64, 64), (32, 1, 4, 4)),
        ((128, 32, 32, 32), (64, 32, 4, 4)),
        ((128, 64, 16, 16), (96, 64, 4, 4)),
        ((128, 96, 8, 8), (64, 96, 3, 3)),
        ((128, 64, 8, 8), (64, 96, 4, 4)),
        ((128, 96, 16, 16), (96, 64, 4, 4)),
        ((128, 64, 32, 32), (64, 32, 4, 4)),
        ((128, 32, 64, 64), (1, 32, 3, 3)),
        ((128, 3, 64, 64), (64, 3, 3, 3)),
        ((128, 64, 64, 64), (128, 64, 3, 3)),
        ((128, 128, 64, 64), (128, 128, 3, 3)),
        ((128, 128, 64, 64), (256, 128, 3, 3)),
    }
)
CASE_BATCHES = frozenset({64})
"""resnet-50 and redimnet run at batch 64: the grid draws no batch of 64 at all."""


def _conv_grid(rng: random.Random, count: int) -> list[dict[str, Any]]:
    grid: list[dict[str, Any]] = []
    chans = [1, 3, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 384, 512, 768, 1024, 2048]
    batches = [2, 4, 8, 16, 24, 32, 48, 96, 128]
    while len(grid) < count:
        kind = rng.choices(
            ["2d", "1d", "t2d", "dw1d", "dw2d", "rect2d"], weights=[50, 15, 12, 6, 5, 12]
        )[0]
        dtype = rng.choice(["float32", "bfloat16", "float16"])
        n = rng.choice(batches)
        ci, co = rng.choice(chans), rng.choice(chans)
        if kind in ("dw1d", "dw2d"):
            co = ci = rng.choice([32, 64, 128, 256, 512, 864])
            groups = ci
        else:
            groups = 1
        if kind in ("1d", "dw1d"):
            spatial = [rng.choice([16, 50, 100, 128, 200, 300, 500, 1000])]
            k = [rng.choice([1, 1, 3, 3, 5, 7])]
        else:
            hw = rng.choice([4, 7, 8, 12, 14, 16, 24, 28, 32, 48, 56, 64, 96, 112, 128])
            if kind == "rect2d":
                spatial = [rng.choice([3, 6, 12, 36, 72]), rng.choice([50, 100, 200, 300])]
                k = [rng.choice([1, 2, 3]), rng.choice([1, 3])]
            else:
                spatial = [hw, hw]
                kk = rng.choice([1, 1, 2, 3, 3, 3, 4, 5, 7])
                k = [kk, kk]
        s = rng.choice([1, 1, 2]) if kind != "rect2d" else rng.choice([1, 2, 3])
        stride = [s] + [1 if kind == "rect2d" else s] * (len(spatial) - 1)
        pad = [kk // 2 if rng.random() < 0.7 else 0 for kk in k]
        if any(sp + 2 * p < kk for sp, p, kk in zip(spatial, pad, k, strict=True)):
            continue
        el = 4 if dtype == "float32" else 2
        x_shape = [n, ci, *spatial]
        w_shape = [ci, co // groups, *k] if kind == "t2d" else [co, ci // groups, *k]
        out_sp = [
            (sp - 1) * st - 2 * p + kk if kind == "t2d" else (sp + 2 * p - kk) // st + 1
            for sp, p, kk, st in zip(spatial, pad, k, stride, strict=True)
        ]
        xb = el * n * ci * _prod(spatial)
        yb = el * n * co * _prod(out_sp)
        if max(xb, yb) > 768 << 20 or min(out_sp) < 1 or el * _prod(w_shape) > 128 << 20:
            continue
        if n in CASE_BATCHES or (tuple(x_shape), tuple(w_shape)) in CASE_CONVS:
            continue
        grid.append(
            dict(
                kind=kind,
                dtype=dtype,
                x=x_shape,
                w=w_shape,
                stride=stride,
                padding=pad,
                groups=groups,
                transposed=kind == "t2d",
                bias=rng.random() < 0.5,
                input_grad=rng.random() < 0.9,
            )
        )
    return grid


def _prod(values: list[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _rnn_grid() -> list[dict[str, Any]]:
    """LSTM shapes off the fitting grid of the first analysis, plus GRU and RNN."""
    rows: list[dict[str, Any]] = []
    shapes = [
        # (input, hidden, layers, batch, time, dropout)
        (128, 384, 2, 16, 200, 0.1),
        (512, 256, 3, 48, 64, 0.3),
        (96, 192, 1, 24, 300, 0.0),
        (256, 1024, 1, 8, 50, 0.0),
        (64, 128, 2, 64, 128, 0.2),
        (300, 300, 3, 20, 150, 0.5),
        (256, 768, 2, 12, 400, 0.1),
        (80, 512, 5, 4, 1000, 0.2),
        (128, 64, 3, 128, 100, 0.0),
        (1024, 512, 2, 32, 64, 0.0),
    ]
    for i, h, layers, b, t, p in shapes:
        rows.append(dict(mode="LSTM", cfg=[i, h, layers, b, t, p], bi=False, dtype="float32"))
    for i, h, layers, b, t, p in shapes[:4]:
        rows.append(dict(mode="LSTM", cfg=[i, h, layers, b, t, p], bi=True, dtype="float32"))
        rows.append(dict(mode="LSTM", cfg=[i, h, layers, b, t, p], bi=False, dtype="bfloat16"))
        rows.append(dict(mode="LSTM", cfg=[i, h, layers, b, t, p], bi=False, dtype="float16"))
    for mode in ("GRU", "RNN"):
        for i, h, layers, b, t, p in shapes[:6]:
            rows.append(dict(mode=mode, cfg=[i, h, layers, b, t, p], bi=False, dtype="float32"))
        rows.append(dict(mode=mode, cfg=list(shapes[1]), bi=True, dtype="float32"))
    return rows


def _events(torch: Any) -> list[list[Any]]:
    snap = torch.cuda.memory._snapshot()
    return [
        [e["action"][0], e["size"], e["addr"]]
        for trace in snap["device_traces"]
        for e in trace
        if e["action"] in ("alloc", "free_requested")
    ]


def _probe_conv(torch: Any, row: dict[str, Any]) -> list[list[Any]]:
    dtype = getattr(torch, row["dtype"])
    x = torch.randn(row["x"], device="cuda", dtype=dtype, requires_grad=row["input_grad"])
    w = torch.randn(row["w"], device="cuda", dtype=dtype, requires_grad=True)
    out_ch = row["w"][1] * row["groups"] if row["transposed"] else row["w"][0]
    b = torch.randn(out_ch, device="cuda", dtype=dtype, requires_grad=True) if row["bias"] else None

    def once() -> None:
        w.grad = None
        x.grad = None
        if b is not None:
            b.grad = None
        y = torch.ops.aten.convolution(
            x,
            w,
            b,
            row["stride"],
            row["padding"],
            [1] * len(row["stride"]),
            row["transposed"],
            [0] * len(row["stride"]),
            row["groups"],
        )
        g = torch.ones_like(y)
        torch.empty(FWD_MARK, dtype=torch.uint8, device="cuda")
        y.backward(g)
        torch.empty(BWD_MARK, dtype=torch.uint8, device="cuda")

    once()
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    once()
    torch.cuda.synchronize()
    events = _events(torch)
    torch.cuda.memory._record_memory_history(enabled=None)
    return events


def _probe_rnn(torch: Any, row: dict[str, Any]) -> list[list[Any]]:
    i, h, layers, b, t, p = row["cfg"]
    cls = getattr(torch.nn, row["mode"])
    m = cls(i, h, num_layers=layers, batch_first=True, dropout=p, bidirectional=row["bi"]).cuda()
    x = torch.randn(b, t, i, device="cuda", requires_grad=True)
    amp = row["dtype"] != "float32"

    def once() -> None:
        m.zero_grad(set_to_none=True)
        x.grad = None
        with torch.autocast("cuda", dtype=getattr(torch, row["dtype"]), enabled=amp):
            y, _ = m(x)
        torch.empty(FWD_MARK, dtype=torch.uint8, device="cuda")
        y.float().sum().backward()
        torch.empty(BWD_MARK, dtype=torch.uint8, device="cuda")

    once()
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    once()
    torch.cuda.synchronize()
    events = _events(torch)
    torch.cuda.memory._record_memory_history(enabled=None)
    return events


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=200.0)
    parser.add_argument("--convs", type=int, default=600)
    args = parser.parse_args()
    started = time.perf_counter()
    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "multiprocessor_count": torch.cuda.get_device_properties(0).multi_processor_count,
        "marks": [FWD_MARK, BWD_MARK],
        "rnn": [],
        "conv": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for row in _rnn_grid():
        try:
            row["events"] = _probe_rnn(torch, row)
        except Exception as exc:  # a probe row that fails is recorded, not fatal
            row["error"] = repr(exc)
        torch.cuda.empty_cache()
        record["rnn"].append(row)
    for row in _conv_grid(random.Random(2026), args.convs):
        if time.perf_counter() - started > args.seconds:
            break
        try:
            row["events"] = _probe_conv(torch, row)
        except Exception as exc:
            row["error"] = repr(exc)
        torch.cuda.empty_cache()
        record["conv"].append(row)
        if len(record["conv"]) % 100 == 0:  # a partial record survives a time-out
            (args.out / "cudnn_probe.json").write_text(json.dumps(record))
    record["seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "cudnn_probe.json").write_text(json.dumps(record))
    print(f"rnn {len(record['rnn'])} conv {len(record['conv'])} in {record['seconds']} s")


if __name__ == "__main__":
    main()
