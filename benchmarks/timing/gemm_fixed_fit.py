"""A GEMM's fixed cost: a time or FLOPs? The evidence, rendered to results/gemm_fixed.md.

    PYTHONPATH=src:. python -m benchmarks.timing.gemm_fixed_fit

1. On the H100 (results/gemm_fixed_h100.json, benchmarks/timing/gemm_fixed.py): per precision,
   the line t = flops / (peak x e) + c through every shape's device time (weighted by relative
   error), its intercept c in seconds and as FLOPs at the precision's rate (c x peak x e). A
   time is the same in seconds across precisions whose rates differ; FLOPs are the same in
   FLOPs.
2. On GeForce cards (results/geforce_gemm_public.json, published torch.mm throughputs): the
   time of a square GEMM of 1024 and 2048 under each rule, with the calibration's efficiencies
   and the catalog's rates: the fixed part as the calibration's seconds (the model now), as
   the calibration's FLOPs at the card's rate (the model before), and as those FLOPs scaled by
   the card's SM count over the H100's 132 (a tile-filling rule).
"""

from __future__ import annotations

import json
from pathlib import Path

from trainfit.hardware.catalog import get_device
from trainfit.timing.constants import calibration

RESULTS = Path(__file__).with_name("results")
H100_SMS = 132
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """y = a*x + b, least squares with weights 1/y^2 (relative error)."""
    sw = sx = sy = sxx = sxy = 0.0
    for x, y in points:
        w = 1.0 / (y * y)
        sw, sx, sy = sw + w, sx + w * x, sy + w * y
        sxx, sxy = sxx + w * x * x, sxy + w * x * y
    a = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    return a, (sy - a * sx) / sw


def h100_table() -> list[str]:
    raw = json.loads((RESULTS / "gemm_fixed_h100.json").read_text())
    h100 = get_device("h100")
    env = raw["environment"]
    lines = [
        f"## H100: intercept per precision ({env['device']}, {env['date']}, torch "
        f"{env['torch']}, {raw['method']})",
        "",
        "| precision | peak TFLOP/s | shapes | efficiency (slope) | intercept (us) | "
        "intercept as FLOPs at the rate | median excess of shapes under 50 us (us) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    cal = calibration()
    for p in PRECISIONS:
        rows = [r for r in raw["gemm"] if r["dtype"] == p]
        peak = h100.tflops[p].value * 1e12
        a, b = _line([(r["flops"], r["seconds"]) for r in rows])
        eff = 1.0 / (a * peak)
        excess = sorted(
            r["seconds"] - r["flops"] / (peak * cal.matmul_efficiency[p])
            for r in rows
            if r["seconds"] < 50e-6
        )
        lines.append(
            f"| {p} | {peak / 1e12:.1f} | {len(rows)} | {eff:.3f} | {b * 1e6:.2f} | "
            f"{b * peak * eff:.3g} | {excess[len(excess) // 2] * 1e6:.2f} |"
        )
    return lines


def _rules(device_key: str, precision: str, n: int) -> dict[str, float]:
    """Modelled seconds of an n x n x n torch.mm under each rule for the fixed part."""
    cal = calibration()
    device, h100 = get_device(device_key), get_device("h100")
    peak = device.tflops[precision].value * 1e12
    eff = cal.matmul_efficiency[precision]
    flops = 2.0 * n**3
    seconds = cal.matmul_fixed_seconds[precision]
    as_flops = seconds * h100.tflops[precision].value * 1e12 * eff
    sms = device.sm_count.value
    # NB: the back-to-back calls of the published harness each add the shortest kernel time
    base = flops / (peak * eff) + cal.kernel_seconds
    return {
        "seconds": base + seconds,
        "flops": base + as_flops / (peak * eff),
        "flops_per_sm": base + as_flops * sms / H100_SMS / (peak * eff),
    }


def geforce_table() -> list[str]:
    raw = json.loads((RESULTS / "geforce_gemm_public.json").read_text())
    lines = [
        "## GeForce: published square GEMMs against each rule (predicted / measured time)",
        "",
        "| card | precision | n | measured (us) | seconds (now) | FLOPs (before) | "
        "FLOPs x SMs/132 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in raw["rows"]:
        for p, by_size in row["tflops"].items():
            for n in (1024, 2048):
                measured = 2.0 * n**3 / (by_size[str(n)] * 1e12)
                rules = _rules(row["device_key"], p, n)
                lines.append(
                    f"| {row['device_key']} | {p} | {n} | {measured * 1e6:.1f} | "
                    + " | ".join(f"{rules[k] / measured:.2f}" for k in rules)
                    + " |"
                )
    return lines


def main() -> int:
    text = "\n".join(
        ["# A GEMM's fixed cost: time or FLOPs", "", *h100_table(), "", *geforce_table(), ""]
    )
    (RESULTS / "gemm_fixed.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
