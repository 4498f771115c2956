"""Derive the step-time model's constants from the single-kernel measurements of one GPU.

    PYTHONPATH=src:. python -m benchmarks.timing.calibrate \
        benchmarks/timing/results/microbench_h100.json src/trainfit/timing/calibration.json

Nothing from the accuracy suite's training steps is used: the step-time table that
`benchmarks.timing.compare` prints is held out entirely. Each constant says how it was read:
- memory efficiency (streaming kernels: the foreach optimizer): achieved / datasheet bandwidth
  of copies and multiplies of >= 256 MiB;
- elementwise efficiency (every other memory-bound op): the median over layer norm and its
  backward, GELU, softmax, dropout, a transposing copy, a cast and a reduction at 16M+
  elements, launch latency included (so on the low side);
- kernel time: back-to-back tiny kernels replayed from a CUDA graph (the host not in the way);
- launch latency of an isolated timed call (the microbenchmark's own, removed from its times):
  the median time of copies of <= 1 MiB minus the kernel time;
- matmul, per precision: a line t = flops / (peak * efficiency) + fixed through torch.mm
  times (weighted by relative error), fixed expressed as FLOPs at the calibrated rate;
- attention and convolution, per precision: the median over the measured shapes of FLOPs
  (PyTorch's formulas; causal halved as the tracer counts it) over the time of the forward
  and forward+backward calls;
- host: seconds per op of modules whose forward records autograd nodes, per op of their
  backward, the extra of a convolution call (cuDNN's plan lookup), and of each optimizer's
  step a fixed part and a part per parameter tensor (steps over 4 and 256 tensors), and
  GradScaler's per tensor;
- LSTM: seconds per sequential step (time step x layer) of cuDNN's LSTM, forward and backward,
  for hidden sizes at most 128 and above.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry

from trainfit.hardware.catalog import get_device

aten = torch.ops.aten
LSTM_PERSISTENT_HIDDEN = 128
"""At or below this hidden size the grid's LSTMs ran ~6x faster per step (cuDNN's persistent
kernels, by the measurements; cuDNN documents no threshold): two sets of step times."""


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """y = a*x + b, least squares with weights 1/y^2 (relative error)."""
    sw = sx = sy = sxx = sxy = 0.0
    for x, y in points:
        w = 1.0 / (y * y)
        sw += w
        sx += w * x
        sy += w * y
        sxx += w * x * x
        sxy += w * x * y
    a = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    b = (sy - a * sx) / sw
    return a, max(0.0, b)


def _attention_flops(shape: list[int], causal: bool, backward: bool) -> int:
    b, h, s, d = shape
    q = torch.empty(b, h, s, d, device="meta")
    fwd = flop_registry[aten._scaled_dot_product_flash_attention](q, q, q, out_val=(q,))
    total = fwd
    if backward:
        total += flop_registry[aten._scaled_dot_product_flash_attention_backward](
            q, q, q, q, q, out_val=(q, q, q)
        )
    return total // 2 if causal else total


def calibrate(micro: dict[str, Any]) -> dict[str, Any]:
    env = micro["environment"]
    device = get_device("h100")
    peak = {p: f.value * 1e12 for p, f in device.tflops.items() if f.value}
    bandwidth = device.memory_bandwidth_gbs.value * 1e9
    memory = [r for r in micro["memory"] if "bytes" in r]
    kernel = next(r["tiny_kernel_seconds"] for r in micro["memory"] if "tiny_kernel_seconds" in r)
    achieved = [
        r[f"moved_{op}"] / r[f"{op}_seconds"] / bandwidth
        for r in memory
        if r["bytes"] >= 256 << 20
        for op in ("copy", "mul")
    ]
    latency = statistics.median(r["copy_seconds"] for r in memory if r["bytes"] <= 1 << 20) - kernel
    matmul_eff, matmul_fixed = {}, {}
    for dtype in ("bf16", "fp16", "fp32", "tf32"):
        pts = [
            (r["flops"], r["seconds"] - latency)
            for r in micro["matmul"]
            if r["dtype"] == dtype and r["seconds"] - latency > 5 * kernel
        ]
        a, b = _line(pts)
        matmul_eff[dtype] = round(1.0 / (a * peak[dtype]), 4)
        matmul_fixed[dtype] = round(b * peak[dtype] * matmul_eff[dtype])
    attention = {}
    for dtype, name in (("bfloat16", "bf16"), ("float16", "fp16")):
        rates = []
        for r in micro["attention"]:
            if r["dtype"] != dtype:
                continue
            flops = _attention_flops(r["shape"], False, False) + _attention_flops(
                r["shape"], True, True
            )
            time = r["forward_seconds"] + r["causal_forward_backward_seconds"] - 3 * latency
            rates.append(flops / time / peak[name])
        attention[name] = round(statistics.median(rates), 4)
    conv = {}
    for dtype in ("bf16", "fp16", "tf32"):
        rates = [
            # forward twice, then both backward passes (input and weight)
            4
            * r["forward_flops"]
            / (r["forward_seconds"] + r["forward_backward_seconds"] - 3 * latency)
            / peak[dtype]
            for r in micro["conv"] + micro["conv_more"]
            if r["dtype"] == dtype
        ]
        conv[dtype] = round(statistics.median(rates), 4)
    # NB: x + x reads one tensor (counted as two) and fp32 .float() is a no-op: left out
    elementwise = [
        r["bytes"] / r["seconds"] / bandwidth
        for r in micro["memory_mix"]
        if r["shape"][0] * r["shape"][1] >= 1 << 24
        and r["kernel"] != "add"
        and not (r["kernel"] == "to_fp32" and r["dtype"] == "float32")
    ]
    training = micro["host_training"]
    forward_op = training["forward"]["op_seconds"]
    optimizer_param, optimizer_fixed = {}, {}
    for kind in ("adamw", "sgd", "adafactor"):
        small, large = (
            next(r for r in micro["optimizer_sizes"] if r["optimizer"] == kind and r["params"] == n)
            for n in (4, 256)
        )
        per = (large["call_seconds"] - small["call_seconds"]) / (large["params"] - small["params"])
        optimizer_param[kind] = round(per, 9)
        optimizer_fixed[kind] = round(max(0.0, small["call_seconds"] - per * small["params"]), 9)
    momentum = training["optimizer_sgd-momentum"]
    optimizer_param["sgd-momentum"] = round(
        (momentum["call_seconds"] - optimizer_fixed["sgd"]) / momentum["params"], 9
    )
    optimizer_fixed["sgd-momentum"] = optimizer_fixed["sgd"]
    scaler_param = (
        training["scaler_adamw"]["call_seconds"] - training["optimizer_adamw"]["call_seconds"]
    ) / training["optimizer_adamw"]["params"]
    lstm: dict[str, dict[str, float]] = {}
    for size, rows in (
        ("persistent", [r for r in micro["lstm"] if r["hidden"] <= LSTM_PERSISTENT_HIDDEN]),
        ("stepped", [r for r in micro["lstm"] if r["hidden"] > LSTM_PERSISTENT_HIDDEN]),
    ):
        steps = [r["seq"] * r["layers"] for r in rows]
        lstm[size] = {
            "forward": round(
                statistics.median(
                    r["forward_seconds"] / n for r, n in zip(rows, steps, strict=True)
                ),
                9,
            ),
            "backward": round(
                statistics.median(
                    (r["forward_backward_seconds"] - r["forward_seconds"]) / n
                    for r, n in zip(rows, steps, strict=True)
                ),
                9,
            ),
        }
    return {
        "device": env["device"],
        "catalog_row": device.name,
        "date": env["date"][:10],
        "versions": {k: env[k] for k in ("torch", "cuda", "cudnn", "transformers", "python")},
        "source": "benchmarks/timing/results/microbench_h100.json (benchmarks/timing/calibrate.py)",
        "memory_efficiency": round(statistics.median(achieved), 4),
        "elementwise_efficiency": round(statistics.median(elementwise), 4),
        "kernel_seconds": round(kernel, 9),
        "isolated_launch_seconds": round(latency, 9),
        "matmul_efficiency": matmul_eff,
        "matmul_fixed_flops": matmul_fixed,
        "attention_efficiency": attention,
        "conv_efficiency": conv,
        "host_op_seconds": round(forward_op, 9),
        "host_backward_op_seconds": round(training["backward"]["op_seconds"], 9),
        "host_conv_extra_seconds": round(training["conv_forward"]["op_seconds"] - forward_op, 9),
        "optimizer_host_seconds_per_param": optimizer_param,
        "optimizer_host_seconds_fixed": optimizer_fixed,
        "scaler_host_seconds_per_param": round(max(0.0, scaler_param), 9),
        "lstm_persistent_hidden": LSTM_PERSISTENT_HIDDEN,
        "lstm_step_seconds": lstm,
    }


def main() -> None:
    micro = json.loads(Path(sys.argv[1]).read_text())
    result = calibrate(micro)
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
