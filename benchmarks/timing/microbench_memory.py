"""`microbench`'s memory-bound kernels: copy and add over sizes, a step's memory-bound kernels
one at a time and back to back, multi-tensor (foreach) kernels."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.timing.microbench_timers import _device_time, _stream_time


def _memory() -> list[dict[str, Any]]:
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        for log in range(12, 31, 2):
            n = (1 << log) // torch.finfo(dtype).bits * 8
            x = torch.randn(n, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            nbytes = x.numel() * x.element_size()
            t_copy = _device_time(lambda x=x, y=y: y.copy_(x))
            t_add = _device_time(lambda x=x: x.add_(1.0))
            t_mul = _device_time(lambda x=x, y=y: torch.mul(x, y))
            out.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "bytes": nbytes,
                    "copy_seconds": t_copy,
                    "add_inplace_seconds": t_add,
                    "mul_seconds": t_mul,
                    "moved_copy": 2 * nbytes,
                    "moved_mul": 3 * nbytes,
                }
            )
            del x, y
    # back-to-back tiny kernels: the shortest a kernel takes in a stream
    x = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(100):
        x.add_(1.0)
    # NB: launched from a CUDA graph so that the host cannot be the limit
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(1000):
            x.add_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    out.append({"tiny_kernel_seconds": start.elapsed_time(end) / 1000.0 / 1000})
    return out


def _memory_mix() -> list[dict[str, Any]]:
    """Memory-bound kernels of a transformer or CNN step at typical sizes: achieved bytes/s
    (bytes read and written once, as the tracer counts them)."""
    out: list[dict[str, Any]] = []
    for dtype in (torch.bfloat16, torch.float32):
        for tokens, hidden in ((4096, 768), (8192, 2048)):
            out += _memory_mix_one(dtype, tokens, hidden)
    return out


def _memory_mix_one(dtype: torch.dtype, tokens: int, hidden: int) -> list[dict[str, Any]]:
    x = torch.randn(tokens, hidden, device="cuda", dtype=dtype, requires_grad=True)
    w = torch.ones(hidden, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.zeros(hidden, device="cuda", dtype=dtype, requires_grad=True)
    heads = x.view(tokens // 512, 512, hidden // 64, 64)
    n = x.numel() * x.element_size()
    cases = {
        "layer_norm": (lambda: F.layer_norm(x, (hidden,), w, b), 2 * n),
        "gelu": (lambda: F.gelu(x), 2 * n),
        "softmax": (lambda: torch.softmax(x, -1), 2 * n),
        "dropout": (lambda: F.dropout(x, 0.1, True), 2 * n + x.numel()),
        "add": (lambda: x + x, 3 * n),
        "transpose_copy": (lambda: heads.transpose(1, 2).contiguous(), 2 * n),
        "to_fp32": (lambda: x.float(), n + x.numel() * 4),
        "sum_dim0": (lambda: x.sum(0), n),
    }
    out = []
    name = str(dtype).removeprefix("torch.")
    for kernel, (fn, moved) in cases.items():
        with torch.no_grad():
            t = _device_time(fn)
        out.append(
            {
                "kernel": kernel,
                "dtype": name,
                "shape": [tokens, hidden],
                "bytes": moved,
                "seconds": t,
            }
        )
    y = F.layer_norm(x, (hidden,), w, b)
    g = torch.randn_like(y)
    t = _device_time(lambda: torch.autograd.grad(y, (x, w, b), g, retain_graph=True))
    out.append(
        {
            "kernel": "layer_norm_backward",
            "dtype": name,
            "shape": [tokens, hidden],
            "bytes": 4 * n,
            "seconds": t,
        }
    )
    return out


def _foreach() -> list[dict[str, Any]]:
    """Multi-tensor kernels over lists of small and large tensors, back to back."""
    out = []
    for count, size in ((8, 64), (100, 64), (100, 1 << 16), (300, 1 << 20)):
        xs = [torch.zeros(size, device="cuda") for _ in range(count)]
        ys = [torch.ones(size, device="cuda") for _ in range(count)]
        out.append(
            {
                "tensors": count,
                "elements": size,
                "bytes": 3 * count * size * 4,
                "add_seconds": _stream_time(lambda xs=xs, ys=ys: torch._foreach_add_(xs, ys)),
                "addcdiv_seconds": _stream_time(
                    lambda xs=xs, ys=ys: torch._foreach_addcdiv_(xs, ys, ys, value=0.1)
                ),
            }
        )
        del xs, ys
    return out


def _memory_stream() -> list[dict[str, Any]]:
    """The memory-bound kernels of `_memory_mix`, timed back to back over four sizes."""
    out: list[dict[str, Any]] = []
    for dtype in (torch.bfloat16, torch.float32):
        for tokens, hidden in ((1024, 1024), (4096, 1024), (8192, 2048), (16384, 4096)):
            x = torch.randn(tokens, hidden, device="cuda", dtype=dtype, requires_grad=True)
            w = torch.ones(hidden, device="cuda", dtype=dtype, requires_grad=True)
            b = torch.zeros(hidden, device="cuda", dtype=dtype, requires_grad=True)
            n = x.numel() * x.element_size()
            y = F.layer_norm(x, (hidden,), w, b)
            g = torch.randn_like(y)
            cases = {
                "layer_norm": (lambda x=x, w=w, b=b, h=hidden: F.layer_norm(x, (h,), w, b), 2 * n),
                "layer_norm_backward": (
                    lambda y=y, x=x, w=w, b=b, g=g: torch.autograd.grad(
                        y, (x, w, b), g, retain_graph=True
                    ),
                    3 * n,
                ),
                "gelu": (lambda x=x: F.gelu(x), 2 * n),
                "softmax": (lambda x=x: torch.softmax(x, -1), 2 * n),
                "dropout": (lambda x=x: F.dropout(x, 0.1, True), 2 * n + x.numel()),
                "mul": (lambda x=x, g=g: x * g, 3 * n),
                "transpose_copy": (
                    lambda x=x, t=tokens, h=hidden: (
                        x.view(t // 256, 256, h // 64, 64).transpose(1, 2).contiguous()
                    ),
                    2 * n,
                ),
                "sum_dim0": (lambda x=x: x.sum(0), n),
            }
            for kernel, (fn, moved) in cases.items():
                with torch.no_grad() if kernel != "layer_norm_backward" else torch.enable_grad():
                    t = _stream_time(fn, calls=20)
                out.append(
                    {
                        "kernel": kernel,
                        "dtype": str(dtype).removeprefix("torch."),
                        "shape": [tokens, hidden],
                        "bytes": moved,
                        "seconds": t,
                    }
                )
            del x, w, b, y, g
    return out
