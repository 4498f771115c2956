"""What SDPA with dropout allocates in backward at the shapes of the attention cases' maxima.

    PYTHONPATH=src:. python -m benchmarks.max_batch.probe_attention --json OUT.json

trainfit emits cuDNN attention's dropout scratch (one byte plus a transient four bytes per
attention score, read off allocator traces at 8 x 12 x 512 x 512 and 64 x 8 x 256 x 256). At
the maximum micro-batch of tiny-gpt (bf16, 8 heads of 64, dropout 0.1) and the melody
transformer (fp16, 8 heads of 32, dropout 0.2) at 1024 tokens, the GPU used exactly that much
less than predicted. This probe runs one causal SDPA forward and backward per shape, with the
kernel PyTorch picks (`torch._fused_sdp_choice`), and records the allocations made in backward
beyond the three input gradients: where the scratch appears and where it does not.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

CONFIGS = (
    # label, dtype, heads, head dim, dropout
    ("tiny-gpt bf16 h8 d64 p0.1", "bfloat16", 8, 64, 0.1),
    ("melody fp16 h8 d32 p0.2", "float16", 8, 32, 0.2),
)
SHAPES = (
    # (batch, sequence): scores = batch x 8 x seq x seq
    (64, 256),
    (8, 512),
    (32, 512),
    (255, 512),
    (256, 512),
    (257, 512),
    (1, 1024),
    (8, 1024),
    (63, 1024),
    (64, 1024),
    (65, 1024),
    (128, 1024),
    (255, 1024),
    (256, 1024),
    (257, 1024),
)


def probe() -> list[dict[str, Any]]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend

    rows: list[dict[str, Any]] = []
    for label, dtype_name, heads, dim, p in CONFIGS:
        dtype = getattr(torch, dtype_name)
        for batch, seq in SHAPES:
            q, k, v = (
                torch.randn(batch, heads, seq, dim, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(3)
            )
            row: dict[str, Any] = {
                "config": label,
                "batch": batch,
                "seq": seq,
                "scores": batch * heads * seq * seq,
            }
            try:
                row["backend"] = SDPBackend(torch._fused_sdp_choice(q, k, v, None, p, True)).name
                out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
                grad = torch.ones_like(out)
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                torch.cuda.memory._record_memory_history(max_entries=10_000)
                out.backward(grad)
                torch.cuda.synchronize()
                snap = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
                sizes = [
                    e["size"]
                    for trace in snap["device_traces"]
                    for e in trace
                    if e["action"] == "alloc"
                ]
                grads = 3 * q.numel() * q.element_size()
                row.update(
                    backward_peak_extra_bytes=torch.cuda.max_memory_allocated() - base - grads,
                    backward_allocs=sorted(sizes, reverse=True)[:8],
                )
            except Exception as exc:  # a probe records what happened
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
            del q, k, v
            torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    import torch

    rows = probe()
    args.json.write_text(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "cudnn": torch.backends.cudnn.version(),
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
