"""`microbench`'s matmuls and attention: torch.mm per dtype over square and transformer
shapes, vocabulary-sized matmuls aligned to 8 or not, flash/efficient SDPA."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.timing.microbench_timers import _device_time, _stream_time


def _matmul() -> list[dict[str, Any]]:
    shapes = [(n, n, n) for n in (128, 256, 512, 1024, 2048, 4096, 8192)]
    # tokens x hidden x out, as in transformer blocks (forward and the two backward shapes)
    for tokens in (512, 4096, 16384):
        for hidden in (768, 2048, 4096):
            shapes += [(tokens, hidden, hidden), (tokens, hidden, 4 * hidden)]
    out = []
    for name, dtype, tf32 in (
        ("bf16", torch.bfloat16, False),
        ("fp16", torch.float16, False),
        ("fp32", torch.float32, False),
        ("tf32", torch.float32, True),
    ):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for m, k, n in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            t = _device_time(lambda a=a, b=b: torch.mm(a, b))
            out.append(
                {
                    "dtype": name,
                    "m": m,
                    "k": k,
                    "n": n,
                    "flops": 2 * m * k * n,
                    "bytes": (m * k + k * n + m * n) * a.element_size(),
                    "seconds": t,
                }
            )
            del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def _attention() -> list[dict[str, Any]]:
    out = []
    for batch, heads, seq, dim in ((8, 12, 512, 64), (4, 32, 1024, 64), (4, 16, 2048, 128)):
        for dtype in (torch.bfloat16, torch.float16):
            q, k, v = (
                torch.randn(batch, heads, seq, dim, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(3)
            )
            fwd = _device_time(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            g = torch.randn_like(o)
            causal = _device_time(
                lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
            )
            both = _device_time(
                lambda q=q, k=k, v=v, g=g: F.scaled_dot_product_attention(
                    q, k, v, is_causal=True
                ).backward(g)
            )
            out.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "shape": [batch, heads, seq, dim],
                    "forward_flops": 4 * batch * heads * seq * seq * dim,
                    "forward_seconds": fwd,
                    "causal_forward_seconds": causal,
                    "causal_forward_backward_seconds": both,
                }
            )
            del q, k, v, o, g
    return out


def _matmul_aligned() -> list[dict[str, Any]]:
    """torch.mm with one dimension a vocabulary size (aligned or not to 8), back to back."""
    out = []
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for tokens, hidden, vocab in (
            (4096, 768, 50257),
            (4096, 768, 50304),
            (2048, 1024, 30522),
            (4096, 512, 1001),
            (4096, 512, 1024),
        ):
            a = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
            w = torch.randn(vocab, hidden, device="cuda", dtype=dtype)
            g = torch.randn(tokens, vocab, device="cuda", dtype=dtype)
            for what, fn in (
                ("forward", lambda a=a, w=w: torch.mm(a, w.t())),
                ("input_grad", lambda g=g, w=w: torch.mm(g, w)),
                ("weight_grad", lambda g=g, a=a: torch.mm(g.t(), a)),
            ):
                out.append(
                    {
                        "dtype": name,
                        "shape": [tokens, hidden, vocab],
                        "what": what,
                        "flops": 2 * tokens * hidden * vocab,
                        "seconds": _stream_time(fn, calls=10),
                    }
                )
            del a, w, g
    torch.backends.cuda.matmul.allow_tf32 = False
    return out
