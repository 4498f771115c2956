"""Derive the step-time model's constants from the single-kernel measurements of one GPU.

    PYTHONPATH=src:. python -m benchmarks.timing.calibrate \
        benchmarks/timing/results/microbench_h100.json src/trainfit/timing/calibration.json

Nothing from the accuracy suite's training steps is used: the step-time table that
`benchmarks.timing.compare` prints is held out entirely. Each constant says how it was read:
- memory efficiency (streaming kernels: the foreach optimizer): achieved / datasheet bandwidth
  of copies and multiplies of >= 256 MiB;
- kernel time: back-to-back tiny kernels replayed from a CUDA graph (the host not in the way);
- launch latency of an isolated timed call (the microbenchmark's own, removed from its times):
  the median time of copies of <= 1 MiB minus the kernel time;
- matmul, per precision: a line t = flops / (peak * efficiency) + fixed through torch.mm
  times (weighted by relative error), fixed in seconds (a time, not FLOPs at the rate: see
  benchmarks/timing/gemm_fixed_fit.py);
- attention and convolution, per precision: the median over the measured shapes of FLOPs
  (PyTorch's formulas; causal halved as the tracer counts it) over the time of the forward
  and forward+backward calls;
- elementwise: a line t = bytes / (bandwidth x e) + fixed through memory-bound kernels
  (layer norm and its backward, GELU, softmax, dropout, a multiply, a transposing copy, a
  reduction) issued back to back at 1M to 64M elements, bf16 and fp32;
- batch-norm curve: achieved / datasheet bandwidth of training BatchNorm of ~32M elements by
  channel count (the kernels parallelise over channels), bf16 (PyTorch's kernel) and fp32
  (cuDNN's);
- convolution fit: t = FLOPs / (peak x e_c) + bytes / (bandwidth x e_b) + fixed, least
  squares over the convolution shapes' forward and forward+backward times (cuDNN's layout
  conversions of NCHW tensors land in the bytes term);
- host: seconds per module call (one-op modules against the bare op), seconds per op of
  modules whose forward records autograd nodes (module calls taken out), per op of their
  backward, the extra of a convolution call (cuDNN's plan lookup), and of each optimizer's
  step a fixed part and a part per parameter tensor (steps over 4 and 256 tensors), and
  GradScaler's per tensor;
- batch norm in fp16 (cuDNN's kernels, as for fp32): its time over the same batch norm's in
  fp32, forward and backward, the median over the batch norms of the conv grid
  (`benchmarks/steptime/results/conv_grid_h100/conv_grid.json`: device time summed from the
  profiler's kernels, 11 shapes of 4-256 channels); the first figures (0.937 forward, 0.754
  backward, from `kernel_grid.py`'s event-timed rows, which the host bounds below ~100 us)
  were replaced by these;
- convolution channel curve: a convolution's profiled time over the convolution fit's, by its
  narrow implicit-GEMM side (as the tracer records it, `trace.costs._conv_gemm_side`), per
  precision group and pass: the conv grid's rows (`conv_grid.json`, the VQ autoencoder's and
  the speaker CNN's layers, square 3 x 3 convolutions of 4-256 channels) below
  `CONV_CURVE_END`, in bins of that side: each bin's geometric-mean side and median ratio,
  then 1 at `CONV_CURVE_END` and beyond;
- attention curve: a fused attention call's profiled time over the model's without the curve,
  per dtype group ("half": the median of fp16's and bf16's, cuDNN's kernels on the H100;
  "fp32": the memory-efficient kernel), variant (not causal, causal, causal with dropout),
  pass, head size (32, 64, 128) and query length (128-4096): the attention grid
  (`benchmarks/steptime/results/attention_h100/attention_grid.json`, 16,384 tokens a call),
  each row's ratio over the parallel curve's slowdown at its own blocks per SM;
- attention parallel curve: the slowdown of calls with few (batch x heads) problems (their
  profiled over modelled time over the grid row's), per group, causal or not, and pass, by
  the kernel's blocks per SM (`attention_parallel.json`);
- batch norm (bf16/fp32): achieved / datasheet bandwidth of training-mode BatchNorm forward
  and backward, NCHW and 1-D (median);
- unaligned matmuls (a dimension not a multiple of 16 bytes, such as a 50257-token
  vocabulary): achieved / peak (median of forward and both gradient shapes);
- foreach: device seconds per tensor a multi-tensor kernel touches (lists of 8 and 100 small
  tensors);
- sync: host seconds a `.item()` of a device value adds (after a tiny reduction);
- LSTM: seconds per sequential step (time step x layer) of cuDNN's LSTM, forward and backward,
  for hidden sizes at most 128 and above.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry

from trainfit.hardware.catalog import get_device
from trainfit.timing.constants import Calibration, calibration

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


def _solve(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Least squares with weights 1/y^2 (relative error): the normal equations, eliminated."""
    k = len(rows[0])
    a = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for row, y in zip(rows, ys, strict=True):
        w = 1.0 / (y * y)
        for i in range(k):
            b[i] += w * row[i] * y
            for j in range(k):
                a[i][j] += w * row[i] * row[j]
    for i in range(k):
        pivot = max(range(i, k), key=lambda r: abs(a[r][i]))
        a[i], a[pivot] = a[pivot], a[i]
        b[i], b[pivot] = b[pivot], b[i]
        for r in range(i + 1, k):
            f = a[r][i] / a[i][i]
            for j in range(i, k):
                a[r][j] -= f * a[i][j]
            b[r] -= f * b[i]
    x = [0.0] * k
    for i in reversed(range(k)):
        x[i] = (b[i] - sum(a[i][j] * x[j] for j in range(i + 1, k))) / a[i][i]
    return x


def _conv_bytes(r: dict[str, Any], element: int) -> tuple[int, int]:
    """Bytes the tracer counts for a microbenchmark convolution: forward (x, w, y) and
    backward (grad y, x, w, grad x, grad w)."""
    if "shape" in r and len(r["shape"]) == 6:
        dims, batch, cin, cout, size, kernel = r["shape"]
    else:
        batch, cin, cout, size, kernel = r["shape"]
        dims = 2
    x = batch * cin * size**dims
    y = batch * cout * size**dims
    w = cout * cin * kernel**dims
    return (x + w + y) * element, (y + x + w + x + w) * element


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


SHARED = {"conv_fit": {"fp16": "bf16"}, "matmul_unaligned_efficiency": {"fp16": "bf16"}}
"""Figures fp16 takes from bf16 (same tensor rate on the H100), named in calibration.json and
filled in when it is read (trainfit.timing.constants): the convolution fit is one fit over
the bf16 and fp16 convolution rows together; no fp16 unaligned matmul was measured."""


CONV_GRID = Path(__file__).parents[1] / "steptime/results/conv_grid_h100/conv_grid.json"
ATTENTION = Path(__file__).parents[1] / "steptime/results/attention_h100"
H100_SMS = 132
"""The calibration card's streaming multiprocessors (the device row's `sm_count`)."""


FIELDS = {f.name for f in dataclasses.fields(Calibration)} - {"shared", "host_fit"}

CONV_CURVE_END = int(os.environ.get("CONV_CURVE_END", "128"))
"""The narrow GEMM side from which a convolution keeps the fit's time: the grid's 128-channel
3 x 3 rows came out at 0.76-1.11 of it, and the fit itself was read off wider convolutions."""
CONV_CURVE_BINS = ((1, 4), (5, 12), (13, 24), (25, 48), (49, CONV_CURVE_END - 1))


def conv_channel_curve(grid: dict[str, Any], cal: Any) -> dict[str, dict[str, list[list[float]]]]:
    """Per precision group and pass, (smaller GEMM side, profiled over modelled time) points
    from the conv grid's convolutions, the model `cal` without a channel curve."""
    from benchmarks.steptime.conv_grid import predicted, row_costs

    curve: dict[str, dict[str, list[list[float]]]] = {}
    for dtype, group in (("fp16", "half"), ("fp32", "tf32")):
        ratios: dict[str, list[tuple[int, float]]] = {"forward": [], "backward": []}
        for row in grid["convs"]:
            if row["dtype"] != dtype:
                continue
            side = row_costs(row, True)[0].detail  # NB: the tracer's own side
            forward, backward = predicted(row, True, cal)
            ratios["forward"].append((side, row["forward_s"] / forward))
            ratios["backward"].append((side, row["backward_s"] / backward))
        curve[group] = {}
        for phase, points in ratios.items():
            line = []
            for low, high in CONV_CURVE_BINS:
                chosen = [(side, ratio) for side, ratio in points if low <= side <= high]
                if chosen:
                    mean_log = statistics.mean(math.log(side) for side, _ in chosen)
                    line.append(
                        [
                            round(math.exp(mean_log)),
                            round(statistics.median(r for _, r in chosen), 3),
                        ]
                    )
            curve[group][phase] = [*line, [CONV_CURVE_END, 1.0]]
    return curve


def attention_curve(grid: dict[str, Any], cal: Any, parallel: dict[str, Any]) -> dict[str, Any]:
    """Per dtype group ("half": fp16 and bf16, the median of both; "fp32"), variant and pass,
    per head size the (length, profiled over modelled time) points of the attention grid, the
    model `cal` without the attention rules, each over the `parallel` curve's slowdown at the
    row's own blocks per SM (`trainfit.timing.kernels.attention_factor` multiplies the two:
    a grid row's shape then takes its own ratio; the grid's calls make 7.8 blocks per SM at
    head size 128 in fp16 and bf16, 62 at head size 32 in fp32)."""
    from benchmarks.steptime.attention_grid import predicted
    from trainfit.timing.kernels import ATTENTION_TILE, interpolate_curve

    ratios: dict[tuple[str, str, str, int, int], list[float]] = {}
    for row in grid["rows"]:
        group = "fp32" if row["dtype"] == "fp32" else "half"
        batch, heads, length, _ = row["shape"]
        blocks = batch * heads * -(-length // ATTENTION_TILE[group]) / H100_SMS
        slowdowns = parallel[group]["full" if row["variant"] == "full" else "causal"]
        forward, backward = predicted(row, cal)
        for side, modelled in (("forward", forward), ("backward", backward)):
            key = (group, row["variant"], side, row["head"], row["length"])
            own = interpolate_curve(slowdowns[side], blocks)
            ratios.setdefault(key, []).append(row[f"{side}_s"] / modelled / own)
    curve: dict[str, Any] = {}
    for (group, variant, side, head, length), values in sorted(ratios.items()):
        heads = curve.setdefault(group, {}).setdefault(variant, {}).setdefault(side, {})
        heads.setdefault(head, []).append([length, round(statistics.median(values), 3)])
    return {
        group: {
            variant: {side: [[h, line] for h, line in heads.items()] for side, heads in v.items()}
            for variant, v in variants.items()
        }
        for group, variants in curve.items()
    }


def attention_parallel_curve(
    parallel: dict[str, Any], grid: dict[str, Any], cal: Any
) -> dict[str, Any]:
    """Per dtype group, causal or not, and pass: (kernel blocks per SM, slowdown) points, the
    few-heads rows' profiled over modelled time (the model `cal` without the attention rules)
    over the grid row's of the same dtype, variant, length and head size; the median over the
    rows of one block count. Blocks: batch x heads x the query length over the kernel's tile
    (`trainfit.timing.kernels.ATTENTION_TILE`) on the H100's 132 SMs.

    NB: over the model's time, not per FLOP: the model's time of a small call is mostly its
    kernels' fixed cost, which a per-FLOP slowdown would multiply too (one bf16 problem of
    512 tokens was modelled 11x its profiled time that way)."""
    from benchmarks.steptime.attention_grid import predicted
    from trainfit.timing.kernels import ATTENTION_TILE

    def over_model(row: dict[str, Any]) -> tuple[float, float]:
        forward, backward = predicted(row, cal)
        return row["forward_s"] / forward, row["backward_s"] / backward

    reference = {(r["dtype"], r["variant"], r["head"], r["length"]): r for r in grid["rows"]}
    points: dict[tuple[str, str, str, float], list[float]] = {}
    for row in parallel["rows"]:
        group = "fp32" if row["dtype"] == "fp32" else "half"
        shape = row["shape"]
        blocks = shape[0] * shape[1] * -(-row["length"] // ATTENTION_TILE[group]) / H100_SMS
        full = over_model(reference[(row["dtype"], row["variant"], row["head"], row["length"])])
        mine = over_model(row)
        causal = "full" if row["variant"] == "full" else "causal"
        for side, a, b in zip(("forward", "backward"), mine, full, strict=True):
            points.setdefault((group, causal, side, round(blocks, 4)), []).append(a / b)
    curve: dict[str, Any] = {}
    for (group, causal, side, blocks), values in sorted(points.items()):
        line = curve.setdefault(group, {}).setdefault(causal, {}).setdefault(side, [])
        line.append([blocks, round(statistics.median(values), 3)])
    return curve


def norm_fp16_ratio(grid: dict[str, Any]) -> dict[str, float]:
    """An fp16 batch norm's time over the same shape's in fp32, forward and backward (the
    median over the conv grid's batch norms, profiled device time)."""
    rows = {(r["name"], r["dtype"]): r for r in grid["norms"]}
    pairs = [
        (rows[(name, "fp16")], fp32) for (name, dtype), fp32 in rows.items() if dtype == "fp32"
    ]
    return {
        side: round(statistics.median(h[f"{side}_s"] / f[f"{side}_s"] for h, f in pairs), 3)
        for side in ("forward", "backward")
    }


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
        matmul_fixed[dtype] = round(b, 12)
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
    conv_fit = {}
    for dtype in ("bf16", "tf32"):
        rows, ys = [], []
        # NB: fp16 and bf16 run at the same tensor rate: one fit for both
        same = ("bf16", "fp16") if dtype == "bf16" else ("tf32",)
        for r in micro["conv"] + micro["conv_more"]:
            if r["dtype"] not in same:
                continue
            fwd_bytes, bwd_bytes = _conv_bytes(r, 4 if dtype == "tf32" else 2)
            rows.append([r["forward_flops"] / peak[dtype], fwd_bytes / bandwidth, 1.0])
            ys.append(r["forward_seconds"])
            rows.append(
                [3 * r["forward_flops"] / peak[dtype], (fwd_bytes + bwd_bytes) / bandwidth, 2.0]
            )
            ys.append(r["forward_backward_seconds"])
        inv_compute, inv_memory, fixed = _solve(rows, ys)
        conv_fit[dtype] = {
            "compute_efficiency": round(1 / inv_compute, 4),
            "memory_efficiency": round(1 / inv_memory, 4) if inv_memory > 0 else None,
            "fixed_seconds": round(max(kernel, fixed - latency), 9),
        }
    unaligned = {}
    for dtype in ("bf16", "tf32"):
        rates = [
            r["flops"] / r["seconds"] / peak[dtype]
            for r in micro["matmul_aligned"]
            if r["dtype"] == dtype
            and any((d * (2 if dtype == "bf16" else 4)) % 16 for d in r["shape"])
        ]
        unaligned[dtype] = round(statistics.median(rates), 4)
    unaligned["fp32"] = matmul_eff["fp32"]  # no tensor cores: alignment is not the limit
    short, long_ = (
        next(r for r in micro["foreach"] if r["tensors"] == n and r["elements"] == 64)
        for n in (8, 100)
    )
    per_ref = statistics.median(
        [
            (long_["add_seconds"] - short["add_seconds"]) / (3 * (100 - 8)),
            (long_["addcdiv_seconds"] - short["addcdiv_seconds"]) / (4 * (100 - 8)),
        ]
    )
    slope, elementwise_fixed = _line([(r["bytes"], r["seconds"]) for r in micro["memory_stream"]])
    norm_curve: dict[str, list[list[float]]] = {}
    for dtype, name in (("bfloat16", "bf16"), ("float32", "fp32")):
        norm_curve[name] = [
            [
                r["channels"],
                round(
                    statistics.median(
                        [
                            2 * r["bytes"] / r["forward_seconds"] / bandwidth,
                            3 * r["bytes"] / r["backward_seconds"] / bandwidth,
                        ]
                    ),
                    4,
                ),
            ]
            for r in micro["batch_norm_channels"]
            if r["dtype"] == dtype
        ]
    module_call = micro["host_modules"]["module_call_seconds"]
    library = micro["host_library"]
    training = micro["host_training"]
    blocks = training["forward"]
    # NB: the blocks microbenchmark is 32 x Sequential(LayerNorm, Linear, GELU) in a
    # Sequential: 129 module calls for its ops
    host_op = (blocks["call_seconds"] - 129 * module_call) / blocks["ops"]
    backward_op = training["backward"]["op_seconds"]
    extras: dict[str, list[float]] = {"conv": [], "norm": []}
    forward_extras: dict[str, list[float]] = {"conv": [], "norm": []}
    for name, row in library.items():
        kind = "norm" if name.startswith("batch_norm") else "conv"
        # NB: one module call; its forward ops at the generic cost, the rest is the library's
        forward_extras[kind].append(
            row["forward_call_seconds"] - module_call - row["forward_ops"] * host_op
        )
        backward_ops = row["forward_backward_ops"] - row["forward_ops"]
        extras[kind].append(
            row["forward_backward_call_seconds"]
            - row["forward_call_seconds"]
            - backward_ops * backward_op
        )
    library_extra = {
        f"{kind}_forward": round(max(0.0, statistics.median(forward_extras[kind])), 9)
        for kind in ("conv", "norm")
    } | {
        f"{kind}_backward": round(max(0.0, statistics.median(extras[kind])), 9)
        for kind in ("conv", "norm")
    }
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
    result = {
        "device": env["device"],
        "catalog_row": device.name,
        "date": env["date"][:10],
        "versions": {k: env[k] for k in ("torch", "cuda", "cudnn", "transformers", "python")},
        "source": "benchmarks/timing/results/microbench_h100.json (benchmarks/timing/calibrate.py)",
        "memory_efficiency": round(statistics.median(achieved), 4),
        "kernel_seconds": round(kernel, 9),
        "isolated_launch_seconds": round(latency, 9),
        "matmul_efficiency": matmul_eff,
        "matmul_fixed_seconds": matmul_fixed,
        "attention_efficiency": attention,
        "matmul_unaligned_efficiency": unaligned,
        "foreach_tensor_seconds": round(per_ref, 12),
        "host_op_seconds": round(host_op, 9),
        "host_module_call_seconds": round(module_call, 9),
        "sync_seconds": round(micro["sync"]["sync_seconds"], 9),
        "elementwise_efficiency": round(1 / (slope * bandwidth), 4),
        "elementwise_fixed_seconds": round(elementwise_fixed, 9),
        "norm_curve": norm_curve,
        "norm_fp16_time_over_fp32": norm_fp16_ratio(json.loads(CONV_GRID.read_text())),
        "conv_fit": conv_fit,
        "conv_channel_curve": {},
        "attention_curve": {},
        "attention_parallel_curve": {},
        "host_backward_op_seconds": round(training["backward"]["op_seconds"], 9),
        "host_library_extra_seconds": library_extra,
        "optimizer_host_seconds_per_param": optimizer_param,
        "optimizer_host_seconds_fixed": optimizer_fixed,
        "scaler_host_seconds_per_param": round(max(0.0, scaler_param), 9),
        "lstm_persistent_hidden": LSTM_PERSISTENT_HIDDEN,
        "lstm_step_seconds": lstm,
        "shared": SHARED,
    }
    # NB: the channel curve is read against the model without it (the rest as just derived)
    bare = dataclasses.replace(calibration(), **{k: v for k, v in result.items() if k in FIELDS})
    result["conv_channel_curve"] = conv_channel_curve(json.loads(CONV_GRID.read_text()), bare)
    grid = json.loads((ATTENTION / "attention_grid.json").read_text())
    parallel = json.loads((ATTENTION / "attention_parallel.json").read_text())
    result["attention_parallel_curve"] = attention_parallel_curve(parallel, grid, bare)
    result["attention_curve"] = attention_curve(grid, bare, result["attention_parallel_curve"])
    return result


def main() -> None:
    micro = json.loads(Path(sys.argv[1]).read_text())
    result = calibrate(micro)
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
