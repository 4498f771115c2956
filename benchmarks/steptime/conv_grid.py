"""Convolutions and batch norms across channel counts: device time from the profiler against
trainfit's roofline, for the conv networks the ninth blind set found under-timed.

    # on the GPU: DIR/conv_grid.json
    PYTHONPATH=src:. python -m benchmarks.steptime.conv_grid --out DIR
    # here: each shape's predicted and profiled device time, forward and backward
    PYTHONPATH=src:. python -m benchmarks.steptime.conv_grid --table DIR/conv_grid.json

Device time is the sum of the kernels torch.profiler records over 5 calls (after 3 warm-up
calls), per call: the host that issues them does not enter, as it did in `kernel_grid.py`'s
event timings of small shapes. Each convolution (NCHW, `F.conv2d` or `F.conv_transpose2d`, no
bias, cuDNN's choice of kernels) and each training-mode batch norm runs its forward alone, then
its forward and backward (input and weight gradients); backward is the difference. The shapes:
the VQ autoencoder's and the speaker CNN's layers, and square C -> C 3 x 3 convolutions and
batch norms at 1-256 channels over 2^19 positions, in fp16 and fp32 (TF32 allowed, PyTorch's
default for cuDNN).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

# (name, C_in, C_out, kernel, stride, transposed, N, H, W)
CONVS: tuple[tuple[str, int, int, int, int, bool, int, int, int], ...] = (
    ("vq-enc1", 1, 32, 4, 2, False, 512, 64, 64),
    ("vq-enc2", 32, 64, 4, 2, False, 512, 32, 32),
    ("vq-enc3", 64, 96, 4, 2, False, 512, 16, 16),
    ("vq-latent", 96, 64, 3, 1, False, 512, 8, 8),
    ("vq-dec1", 64, 96, 4, 2, True, 512, 8, 8),
    ("vq-dec3", 64, 32, 4, 2, True, 512, 32, 32),
    ("vq-out", 32, 1, 3, 1, False, 512, 64, 64),
    ("redim-stem", 1, 12, 3, 1, False, 96, 72, 300),
    ("redim-12", 12, 12, 3, 1, False, 96, 72, 300),
    ("redim-24", 24, 24, 3, 1, False, 96, 36, 300),
    *(
        (f"square-{c}", c, c, 3, 1, False, 2**19 // (64 * 64), 64, 64)
        for c in (4, 8, 16, 32, 64, 128, 256)
    ),
)
NORMS: tuple[tuple[str, int, int, int, int], ...] = (
    ("vq-bn32", 512, 32, 32, 32),
    ("vq-bn64", 512, 64, 16, 16),
    ("redim-bn12", 96, 12, 72, 300),
    ("redim-bn24", 96, 24, 36, 300),
    *((f"square-bn{c}", 2**19 // (64 * 64), c, 64, 64) for c in (4, 8, 16, 32, 64, 128, 256)),
)


def _device_seconds(fn: Any, calls: int = 5) -> float:
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = sum(e.device_time for e in prof.events() if e.device_type.name == "CUDA")
    return total_us / calls / 1e6


def _passes(forward: Any) -> tuple[float, float]:
    """Device seconds of `forward` alone, and of its backward (forward and backward, less it)."""
    import torch

    grad = torch.randn_like(forward())

    def both() -> None:
        torch.autograd.backward(forward(), grad)

    alone = _device_seconds(forward)
    return alone, _device_seconds(both) - alone


def _conv_row(row: tuple[Any, ...], dtype_name: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    name, c_in, c_out, k, stride, transposed, n, h, w = row
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    x = torch.randn(n, c_in, h, w, device="cuda", dtype=dtype, requires_grad=True)
    shape = (c_in, c_out, k, k) if transposed else (c_out, c_in, k, k)
    weight = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    padding = 1 if k in (3, 4) else 0

    def forward() -> Any:
        if transposed:
            return F.conv_transpose2d(x, weight, stride=stride, padding=padding)
        return F.conv2d(x, weight, stride=stride, padding=padding)

    fwd, bwd = _passes(forward)
    return {
        "name": name,
        "dtype": dtype_name,
        "c_in": c_in,
        "c_out": c_out,
        "kernel": k,
        "stride": stride,
        "padding": padding,
        "transposed": transposed,
        "input": [n, c_in, h, w],
        "forward_s": fwd,
        "backward_s": bwd,
    }


def _norm_row(row: tuple[Any, ...], dtype_name: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    name, n, c, h, w = row
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype, requires_grad=True)
    weight = torch.ones(c, device="cuda", requires_grad=True)
    bias = torch.zeros(c, device="cuda", requires_grad=True)
    mean, var = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")

    def forward() -> Any:
        return F.batch_norm(x, mean, var, weight, bias, training=True)

    fwd, bwd = _passes(forward)
    return {
        "name": name,
        "dtype": dtype_name,
        "input": [n, c, h, w],
        "forward_s": fwd,
        "backward_s": bwd,
    }


def measure() -> dict[str, Any]:
    import torch

    torch.backends.cudnn.benchmark = False  # PyTorch's defaults, said aloud
    torch.backends.cudnn.allow_tf32 = True
    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "convs": [],
        "norms": [],
    }
    for dtype in ("fp16", "fp32"):
        record["convs"] += [_conv_row(row, dtype) for row in CONVS]
        record["norms"] += [_norm_row(row, dtype) for row in NORMS]
    return record


def row_costs(row: dict[str, Any], conv: bool) -> tuple[Any, Any]:
    """The row's forward and backward ops as the tracer counts them (`trace.costs.op_cost`)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from trainfit.trace.costs import op_cost

    dtype = {"fp16": torch.float16, "fp32": torch.float32}[row["dtype"]]
    aten = torch.ops.aten
    with FakeTensorMode():
        x = torch.empty(row["input"], dtype=dtype)
        if conv:
            k = row["kernel"]
            shape = (
                (row["c_in"], row["c_out"], k, k)
                if row["transposed"]
                else (row["c_out"], row["c_in"], k, k)
            )
            weight = torch.empty(shape, dtype=dtype)
            args = (x, weight, None, [row["stride"]] * 2, [row["padding"]] * 2, [1, 1])
            args += (row["transposed"], [0, 0], 1)
            out = aten.convolution.default(*args)
            forward = op_cost(aten.convolution.default, args, {}, out)
            back_args = (out, x, weight, [0], *args[3:], [True, True, False])
            grads = aten.convolution_backward.default(*back_args)
            backward = op_cost(aten.convolution_backward.default, back_args, {}, grads)
        else:
            c = row["input"][1]
            weight, bias = torch.empty(c), torch.empty(c)
            mean, var = torch.empty(c), torch.empty(c)
            args = (x, weight, bias, mean, var, True, 0.1, 1e-5)
            out = aten.native_batch_norm.default(*args)
            forward = op_cost(aten.native_batch_norm.default, args, {}, out)
            back_args = (out[0], x, weight, mean, var, out[1], out[2], True, 1e-5)
            back_args += ([True, True, True],)
            grads = aten.native_batch_norm_backward.default(*back_args)
            backward = op_cost(aten.native_batch_norm_backward.default, back_args, {}, grads)
    return forward, backward


def predicted(row: dict[str, Any], conv: bool, cal: Any = None) -> tuple[float, float]:
    """trainfit's modelled device seconds of the row's forward and backward ops on the H100
    (`row_costs`), under `cal` (default: the shipped calibration)."""
    from trainfit.hardware.catalog import get_device
    from trainfit.spec import Precision, TrainSpec
    from trainfit.timing.constants import calibration
    from trainfit.timing.step import Rates
    from trainfit.trace.costs import Phase

    precision = Precision.FP16 if row["dtype"] == "fp16" else Precision.FP32
    rates = Rates(
        get_device("h100"), TrainSpec(model="gpt2", precision=precision), cal or calibration()
    )
    forward, backward = row_costs(row, conv)
    return rates.time(forward, Phase.FORWARD).seconds, rates.time(backward, Phase.BACKWARD).seconds


def table(record: dict[str, Any]) -> list[str]:
    lines = [
        "| kind | shape | dtype | forward us: model / profiled | ratio | backward us: model / "
        "profiled | ratio |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    ratios: dict[str, list[float]] = {}
    for kind, rows in (("conv", record["convs"]), ("norm", record["norms"])):
        for row in rows:
            fwd, bwd = predicted(row, kind == "conv")
            rf, rb = fwd / row["forward_s"], bwd / row["backward_s"]
            ratios.setdefault(f"{kind} {row['dtype']}", []).extend([rf, rb])
            lines.append(
                f"| {kind} | {row['name']} {row['input']} | {row['dtype']} | "
                f"{fwd * 1e6:.0f} / {row['forward_s'] * 1e6:.0f} | {rf:.2f} | "
                f"{bwd * 1e6:.0f} / {row['backward_s'] * 1e6:.0f} | {rb:.2f} |"
            )
    lines.append("")
    for key, values in ratios.items():
        lines.append(f"- {key}: median ratio {statistics.median(values):.2f} over {len(values)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path)
    args = parser.parse_args()
    if args.table:
        print("\n".join(table(json.loads(args.table.read_text()))))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "conv_grid.json").write_text(json.dumps(measure(), indent=1) + "\n")
    print("done", flush=True)


if __name__ == "__main__":
    main()
