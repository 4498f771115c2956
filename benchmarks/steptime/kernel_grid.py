"""Batch norm and fused attention kernels over a grid of shapes and dtypes, on the GPU at hand.

    PYTHONPATH=src:. python -m benchmarks.steptime.kernel_grid --out DIR   # writes DIR/grid.json

Asked by the eighth blind set's device-bound misses (`kinds.py`, `results/kinds_h100/`): its
fp16 batch norms ran at about half the speed the model gives them, and its fused attention at
short sequences and small heads at a quarter to three quarters. Each kernel is timed alone, on
the default stream, with CUDA events around 20 calls after 5 warm-up calls, median of 3 such
blocks:

- batch norm in training mode (`F.batch_norm`, fp32 weights, as autocast leaves them) forward,
  and forward + backward, at channels C and elements per channel M (N x 32 x 32, or N x L for
  3-D inputs), in fp32, fp16 and bf16;
- `F.scaled_dot_product_attention` (PyTorch's backend choice), causal and not, forward and
  forward + backward, at head sizes 32-128 and sequences 128-2048, batch x heads sized so that
  a call does about 8 GFLOP of forward work (at least 8), in fp16, bf16 and fp32.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

DTYPES = ("fp32", "fp16", "bf16")


def _timed(fn: Any, calls: int = 20, blocks: int = 3) -> float:
    """Median over `blocks` of the mean seconds of one call of `fn`, CUDA events around them."""
    import torch

    for _ in range(5):
        fn()
    seconds = []
    for _ in range(blocks):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(seconds)


def _dtype(name: str) -> Any:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _batch_norm(shape: tuple[int, ...], dtype: str) -> tuple[float, float]:
    """Forward and forward + backward seconds of one training-mode batch norm."""
    import torch
    import torch.nn.functional as F

    channels = shape[1]
    x = torch.randn(shape, device="cuda", dtype=_dtype(dtype), requires_grad=True)
    weight = torch.ones(channels, device="cuda", requires_grad=True)
    bias = torch.zeros(channels, device="cuda", requires_grad=True)
    mean = torch.zeros(channels, device="cuda")
    var = torch.ones(channels, device="cuda")

    def forward() -> Any:
        return F.batch_norm(x, mean, var, weight, bias, training=True)

    grad = torch.randn_like(forward())

    def both() -> None:
        torch.autograd.backward(forward(), grad)

    return _timed(forward), _timed(both)


def _attention(heads: int, seq: int, head: int, dtype: str, causal: bool) -> tuple[float, float]:
    """Forward and forward + backward seconds of one fused attention call."""
    import torch
    import torch.nn.functional as F

    q, k, v = (
        torch.randn(heads, 1, seq, head, device="cuda", dtype=_dtype(dtype), requires_grad=True)
        for _ in range(3)
    )

    def forward() -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    grad = torch.randn_like(forward())

    def both() -> None:
        torch.autograd.backward(forward(), grad)

    return _timed(forward), _timed(both)


def batch_norms() -> list[dict[str, Any]]:
    rows = []
    for dims in (4, 3):
        for channels in (16, 32, 64, 128, 256, 512):
            for per_channel in (1 << 12, 1 << 14, 1 << 16, 1 << 18):
                shape = (
                    (max(1, per_channel // 1024), channels, 32, 32)
                    if dims == 4
                    else (max(1, per_channel // 256), channels, 256)
                )
                for dtype in DTYPES:
                    forward, both = _batch_norm(shape, dtype)
                    rows.append(
                        {
                            "dims": dims,
                            "shape": list(shape),
                            "channels": channels,
                            "per_channel": per_channel,
                            "dtype": dtype,
                            "forward_s": forward,
                            "forward_backward_s": both,
                        }
                    )
    return rows


def attentions() -> list[dict[str, Any]]:
    rows = []
    for dtype in DTYPES:
        for head in (32, 64, 96, 128):
            for seq in (128, 256, 512, 1024, 2048):
                heads = max(8, round(8e9 / (4 * seq * seq * head)))
                for causal in (True, False):
                    forward, both = _attention(heads, seq, head, dtype, causal)
                    rows.append(
                        {
                            "dtype": dtype,
                            "head": head,
                            "seq": seq,
                            "batch_heads": heads,
                            "causal": causal,
                            "forward_flops": 4 * heads * seq * seq * head // (2 if causal else 1),
                            "forward_s": forward,
                            "forward_backward_s": both,
                        }
                    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's defaults, said aloud
    torch.backends.cudnn.allow_tf32 = True
    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    record["attention"] = attentions()
    (args.out / "grid.json").write_text(json.dumps(record, indent=1) + "\n")
    print("attention", len(record["attention"]), flush=True)
    record["batch_norm"] = batch_norms()
    (args.out / "grid.json").write_text(json.dumps(record, indent=1) + "\n")
    print("batch norm", len(record["batch_norm"]), flush=True)


if __name__ == "__main__":
    main()
