"""Measure the rates the step-time model is calibrated with, on the CUDA GPU at hand.

    PYTHONPATH=src:. python -m benchmarks.timing.microbench --out DIR

Nothing here is a training step of the accuracy suite: these are single kernels and host
loops, so the step-time table stays held out. Writes DIR/microbench.json:
- matmul: achieved FLOP/s of torch.mm per dtype (bf16, fp16, fp32 without tf32, tf32) over
  square and transformer-shaped problems;
- memory: achieved bytes/s of a copy and an in-place add over sizes from 4 KiB to 1 GiB
  (the smallest give the shortest time a kernel takes back to back);
- attention: flash/efficient SDPA forward and backward;
- conv: 3x3 and 1x1 convolutions forward and backward, bf16 and tf32;
- host: seconds the host spends per op issuing tiny ops (forward), per op of backward, and
  per module call, none waiting for the device;
- host_training: the same as a training step issues ops: modules whose forward records
  autograd nodes, their backward, a convolution, each optimizer's step, GradScaler's step;
- lstm: cuDNN LSTM forward and forward+backward over a grid of shapes (time per time step);
- memory_mix: the memory-bound kernels of a step (layer norm and its backward, GELU, softmax,
  dropout, add, a transposing copy, a cast, a reduction) at transformer sizes;
- optimizer_sizes: host time of optimizer steps over 4 and 256 tensors (fixed and per-tensor);
- conv_more: more convolutions (fp16, 1-D, small images);
- batch_norm: BatchNorm forward and backward in training (NCHW and 1-D), back to back;
- matmul_aligned: vocabulary-sized matmuls with the size a multiple of 8 or not (cuBLAS picks
  slower kernels for unaligned sizes), back to back;
- foreach: multi-tensor kernels over short and long lists, back to back;
- memory_stream: memory_mix's kernels back to back (launch latency hidden) at four sizes;
- batch_norm_channels: training BatchNorm of ~32M elements over 16 to 2048 channels;
- host_modules: the host cost of a module call beyond its op (65 calls of a one-op module);
- sync: the host cost of reading a device value back (`.item()` after a tiny reduction);
- host_library: host time per call of convolution, transposed convolution and BatchNorm,
  forward and forward+backward, at tiny sizes (the host is the limit);
- host_torch_modules: host time per forward of nn.MultiheadAttention and the
  Transformer encoder and decoder layers, whose Python issues no op for much of its time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode


def _device_time(fn: Any, repeat: int = 20, warmup: int = 3) -> float:
    """Median seconds of `fn` on the device (CUDA events around each call)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    times.sort()
    return times[len(times) // 2]


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


def _conv() -> list[dict[str, Any]]:
    out = []
    torch.backends.cudnn.benchmark = False
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True)):
        torch.backends.cudnn.allow_tf32 = tf32
        for batch, cin, cout, hw, kernel in (
            (64, 64, 64, 56, 3),
            (64, 256, 64, 56, 1),
            (64, 128, 128, 28, 3),
            (64, 512, 2048, 7, 1),
            (64, 3, 64, 224, 7),
        ):
            x = torch.randn(batch, cin, hw, hw, device="cuda", dtype=dtype, requires_grad=True)
            w = torch.randn(
                cout, cin, kernel, kernel, device="cuda", dtype=dtype, requires_grad=True
            )
            pad = kernel // 2
            fwd = _device_time(lambda x=x, w=w, pad=pad: F.conv2d(x, w, padding=pad))
            y = F.conv2d(x, w, padding=pad)
            g = torch.randn_like(y)
            both = _device_time(
                lambda x=x, w=w, pad=pad, g=g: F.conv2d(x, w, padding=pad).backward(g)
            )
            out.append(
                {
                    "dtype": name,
                    "shape": [batch, cin, cout, hw, kernel],
                    "forward_flops": 2 * batch * cout * hw * hw * cin * kernel * kernel,
                    "forward_seconds": fwd,
                    "forward_backward_seconds": both,
                }
            )
            del x, w, y, g
    torch.backends.cudnn.allow_tf32 = True
    return out


def _host() -> dict[str, float]:
    """Host seconds per op when the device is not the limit (tiny tensors)."""
    x = torch.zeros(8, device="cuda")
    n = 5000
    for _ in range(200):
        x = x + 1.0
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        x = x + 1.0
    forward_op = (time.perf_counter() - start) / n
    torch.cuda.synchronize()
    # backward: a chain of n tiny differentiable ops, timed on the host
    w = torch.zeros(8, device="cuda", requires_grad=True)
    h = w
    for _ in range(n):
        h = h * 1.0001
    loss = h.sum()
    torch.cuda.synchronize()
    start = time.perf_counter()
    loss.backward()
    backward_host = (time.perf_counter() - start) / n
    torch.cuda.synchronize()
    # module call: a tiny Linear (one addmm + a view)
    layer = torch.nn.Linear(8, 8, device="cuda")
    inp = torch.zeros(2, 8, device="cuda")
    for _ in range(200):
        layer(inp)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        layer(inp)
    module_call = (time.perf_counter() - start) / n
    torch.cuda.synchronize()
    return {
        "forward_op_seconds": forward_op,
        "backward_op_seconds": backward_host,
        "linear_module_call_seconds": module_call,
    }


class _Count(TorchDispatchMode):
    """Counts the aten ops dispatched under it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _host_per_op(fn: Any, repeat: int = 200) -> dict[str, float]:
    """Host seconds per aten op of `fn` (ops counted in one call under a dispatch mode)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    with _Count() as count:
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    host = (time.perf_counter() - start) / repeat
    torch.cuda.synchronize()
    return {"ops": count.ops, "call_seconds": host, "op_seconds": host / max(1, count.ops)}


def _host_training() -> dict[str, Any]:
    """Host cost per op as a training step issues them: forward ops that record autograd
    nodes inside modules, their backward, a convolution, and each optimizer's step."""
    from trainfit.optim import measured_optimizer
    from trainfit.spec import OptimizerKind

    torch.manual_seed(0)
    blocks = torch.nn.Sequential(
        *[
            torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.GELU())
            for _ in range(32)
        ]
    ).cuda()
    x = torch.randn(4, 16, device="cuda")
    out: dict[str, Any] = {}
    out["forward"] = _host_per_op(lambda: blocks(x))

    def backward() -> None:
        blocks(x).sum().backward()

    both = _host_per_op(backward)
    fwd = out["forward"]
    out["backward"] = {
        "ops": both["ops"] - fwd["ops"],
        "op_seconds": (both["call_seconds"] - fwd["call_seconds"])
        / max(1, both["ops"] - fwd["ops"]),
    }
    conv = torch.nn.Conv2d(8, 8, 3, padding=1).cuda()
    img = torch.randn(2, 8, 8, 8, device="cuda")
    out["conv_forward"] = _host_per_op(lambda: conv(img))
    params = [p for p in blocks.parameters()]
    for p in params:
        p.grad = torch.zeros_like(p)
    for kind in ("adamw", "sgd", "sgd-momentum", "adafactor"):
        opt = measured_optimizer(OptimizerKind(kind), params)
        out[f"optimizer_{kind}"] = _host_per_op(opt.step, repeat=50)
        out[f"optimizer_{kind}"]["params"] = len(params)
    scaler = torch.amp.GradScaler("cuda")
    opt = measured_optimizer(OptimizerKind("adamw"), params)

    one = torch.ones((), device="cuda")

    def scaled_step() -> None:
        scaler.scale(one)
        scaler.step(opt)
        scaler.update()

    out["scaler_adamw"] = _host_per_op(scaled_step, repeat=50)
    return out


def _lstm() -> list[dict[str, Any]]:
    """cuDNN LSTM forward and forward+backward over a grid: time per recurrent step."""
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        for seq, hidden, layers, batch in (
            (64, 256, 1, 32),
            (256, 256, 2, 32),
            (128, 512, 2, 64),
            (512, 128, 2, 32),
        ):
            lstm = torch.nn.LSTM(hidden, hidden, layers, batch_first=True).cuda()
            x = torch.randn(batch, seq, hidden, device="cuda", requires_grad=True)

            def fwd(lstm=lstm, x=x, dtype=dtype) -> None:
                with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                    lstm(x)

            def both(lstm=lstm, x=x, dtype=dtype) -> None:
                with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                    y, _ = lstm(x)
                y.float().sum().backward()

            out.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "seq": seq,
                    "hidden": hidden,
                    "layers": layers,
                    "batch": batch,
                    "forward_seconds": _device_time(fwd),
                    "forward_backward_seconds": _device_time(both),
                }
            )
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


def _optimizer_sizes() -> list[dict[str, Any]]:
    """Host seconds of an AdamW/SGD step over 4 and 256 tiny parameters (fixed + per tensor)."""
    from trainfit.optim import measured_optimizer
    from trainfit.spec import OptimizerKind

    out = []
    for count in (4, 256):
        params = [torch.nn.Parameter(torch.zeros(16, device="cuda")) for _ in range(count)]
        for p in params:
            p.grad = torch.zeros_like(p)
        for kind in ("adamw", "sgd", "adafactor"):
            opt = measured_optimizer(OptimizerKind(kind), params)

            def step(opt=opt) -> None:
                opt.step()
                opt.zero_grad(set_to_none=False)

            r = _host_per_op(step, repeat=50)
            out.append({"optimizer": kind, "params": count, **r})
    return out


def _conv_more() -> list[dict[str, Any]]:
    """More convolution shapes (fp16, 1-D, small images), forward and forward+backward."""
    out = []
    torch.backends.cudnn.allow_tf32 = True
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("tf32", torch.float32)):
        for dims, batch, cin, cout, size, kernel in (
            (2, 256, 32, 64, 32, 3),
            (2, 128, 64, 128, 16, 3),
            (1, 64, 64, 64, 200, 3),
            (1, 64, 128, 128, 200, 1),
            (2, 64, 256, 256, 14, 3),
        ):
            shape = (batch, cin) + (size,) * dims
            x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
            w = torch.randn(
                (cout, cin) + (kernel,) * dims, device="cuda", dtype=dtype, requires_grad=True
            )
            conv = F.conv2d if dims == 2 else F.conv1d
            pad = kernel // 2
            fwd = _device_time(lambda x=x, w=w, conv=conv, pad=pad: conv(x, w, padding=pad))
            y = conv(x, w, padding=pad)
            g = torch.randn_like(y)
            both = _device_time(
                lambda x=x, w=w, conv=conv, pad=pad, g=g: conv(x, w, padding=pad).backward(g)
            )
            out.append(
                {
                    "dtype": name,
                    "shape": [dims, batch, cin, cout, size, kernel],
                    "forward_flops": 2 * batch * cout * size**dims * cin * kernel**dims,
                    "forward_seconds": fwd,
                    "forward_backward_seconds": both,
                }
            )
            del x, w, y, g
    return out


def _stream_time(fn: Any, calls: int = 50) -> float:
    """Median device seconds per call of `fn` issued `calls` times back to back (the host
    runs ahead, so launch latency is hidden as in a training step)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        # NB: a long kernel first lets the host queue the calls before the device reaches them
        torch.cuda._sleep(2_000_000)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0 / calls)
    times.sort()
    return times[len(times) // 2]


def _batch_norm() -> list[dict[str, Any]]:
    """BatchNorm forward and backward in training mode, NCHW and 1-D, bf16 and fp32."""
    out = []
    for dtype in (torch.bfloat16, torch.float32):
        for shape in ((256, 64, 32, 32), (64, 64, 56, 56), (64, 256, 14, 14), (64, 128, 200)):
            x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
            bn = (
                torch.nn.BatchNorm2d(shape[1])
                if len(shape) == 4
                else torch.nn.BatchNorm1d(shape[1])
            )
            bn = bn.cuda()
            with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                y = bn(x)
            g = torch.randn_like(y)

            def fwd(bn=bn, x=x, dtype=dtype) -> None:
                with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                    bn(x)

            bwd = _stream_time(
                lambda y=y, g=g, x=x: torch.autograd.grad(y, x, g, retain_graph=True)
            )
            out.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "shape": list(shape),
                    "bytes": x.numel() * x.element_size(),
                    "forward_seconds": _stream_time(fwd),
                    "backward_seconds": bwd,
                }
            )
            del x, y, g, bn
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


def _batch_norm_channels() -> list[dict[str, Any]]:
    """Training BatchNorm at ~32M elements over 16 to 2048 channels, back to back."""
    out = []
    for dtype in (torch.bfloat16, torch.float32):
        for channels in (16, 64, 256, 1024, 2048):
            hw = max(1, int((32 * 2**20 / 64 / channels) ** 0.5))
            x = torch.randn(64, channels, hw, hw, device="cuda", dtype=dtype, requires_grad=True)
            bn = torch.nn.BatchNorm2d(channels).cuda()
            with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                y = bn(x)
            g = torch.randn_like(y)

            def fwd(bn=bn, x=x, dtype=dtype) -> None:
                with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                    bn(x)

            out.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "channels": channels,
                    "shape": list(x.shape),
                    "bytes": x.numel() * x.element_size(),
                    "forward_seconds": _stream_time(fwd, calls=10),
                    "backward_seconds": _stream_time(
                        lambda y=y, x=x, g=g: torch.autograd.grad(y, x, g, retain_graph=True),
                        calls=10,
                    ),
                }
            )
            del x, y, g, bn
    return out


def _host_modules() -> dict[str, Any]:
    """Host seconds of a module call that runs one op (nn.Identity-like), with autograd."""

    class One(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1.0

    chain = torch.nn.Sequential(*[One() for _ in range(64)]).cuda()
    x = torch.zeros(8, device="cuda", requires_grad=True)
    flat = _host_per_op(lambda: [x * 1.0 for _ in range(64)])
    modules = _host_per_op(lambda: chain(x))
    return {
        "ops_only": flat,
        "in_modules": modules,
        "module_call_seconds": (modules["call_seconds"] - flat["call_seconds"]) / 65,
    }


def _sync() -> dict[str, float]:
    """Host seconds a `.item()` of a device value adds to a tiny op (its kernel is waited for
    and the value copied back)."""
    x = torch.randn(64, device="cuda")
    plain = _host_per_op(lambda: x.sum(), repeat=500)
    item = _host_per_op(lambda: x.sum().item(), repeat=500)
    return {
        "plain_call_seconds": plain["call_seconds"],
        "item_call_seconds": item["call_seconds"],
        "sync_seconds": item["call_seconds"] - plain["call_seconds"],
    }


def _host_library() -> dict[str, Any]:
    """Host seconds per call of the cuDNN-backed ops (tiny tensors, so the host is the limit):
    convolution forward and backward, transposed convolution, BatchNorm forward and backward
    (cuDNN's for fp32, PyTorch's for bf16), each with autograd recording."""
    out: dict[str, Any] = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        x = torch.randn(2, 8, 8, 8, device="cuda", dtype=dtype, requires_grad=True)
        conv = torch.nn.Conv2d(8, 8, 3, padding=1).cuda().to(dtype)
        convt = torch.nn.ConvTranspose2d(8, 8, 2, stride=2).cuda().to(dtype)
        bn = torch.nn.BatchNorm2d(8).cuda().to(dtype)
        for what, module in (("conv", conv), ("conv_transpose", convt), ("batch_norm", bn)):
            fwd = _host_per_op(lambda m=module, x=x: m(x))
            y = module(x)
            g = torch.ones_like(y)

            def both(m=module, g=g, x=x) -> None:
                m(x).backward(g)

            fb = _host_per_op(both)
            out[f"{what}_{name}"] = {
                "forward_call_seconds": fwd["call_seconds"],
                "forward_ops": fwd["ops"],
                "forward_backward_call_seconds": fb["call_seconds"],
                "forward_backward_ops": fb["ops"],
            }
    return out


def _host_torch_modules() -> dict[str, Any]:
    """Host seconds per forward call of PyTorch's Python-heavy modules (nn.MultiheadAttention,
    nn.TransformerEncoderLayer, nn.TransformerDecoderLayer) at tiny sizes, with autograd, and
    the aten ops and module calls each makes (the model takes out what those cost)."""

    class Counting:
        def __init__(self) -> None:
            self.calls = 0

        def __call__(self, module: Any, args: Any) -> None:
            self.calls += 1

    out: dict[str, Any] = {}
    x = torch.randn(2, 8, 64, device="cuda", requires_grad=True)
    modules = {
        "multihead_attention": torch.nn.MultiheadAttention(64, 4, batch_first=True),
        "transformer_encoder_layer": torch.nn.TransformerEncoderLayer(64, 4, 256, batch_first=True),
        "transformer_decoder_layer": torch.nn.TransformerDecoderLayer(64, 4, 256, batch_first=True),
    }
    for name, module in modules.items():
        module = module.cuda().train()
        if name == "multihead_attention":

            def call(m: Any = module) -> None:
                m(x, x, x, need_weights=False)

        elif name == "transformer_decoder_layer":

            def call(m: Any = module) -> None:
                m(x, x)

        else:

            def call(m: Any = module) -> None:
                m(x)

        counter = Counting()
        hook = torch.nn.modules.module.register_module_forward_pre_hook(counter)
        call()
        hook.remove()
        row = _host_per_op(call)
        row["module_calls"] = counter.calls
        out[name] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from benchmarks.accuracy.measure_gpu import _environment

    result: dict[str, Any] = {"environment": _environment()}
    for name, fn in (
        ("host", _host),
        ("memory", _memory),
        ("matmul", _matmul),
        ("attention", _attention),
        ("conv", _conv),
        ("host_training", _host_training),
        ("lstm", _lstm),
        ("memory_mix", _memory_mix),
        ("optimizer_sizes", _optimizer_sizes),
        ("conv_more", _conv_more),
        ("batch_norm", _batch_norm),
        ("matmul_aligned", _matmul_aligned),
        ("foreach", _foreach),
        ("memory_stream", _memory_stream),
        ("batch_norm_channels", _batch_norm_channels),
        ("host_modules", _host_modules),
        ("sync", _sync),
        ("host_library", _host_library),
        ("host_torch_modules", _host_torch_modules),
    ):
        if args.only and name not in args.only.split(","):
            continue
        start = time.perf_counter()
        result[name] = fn()
        print(f"{name}: {time.perf_counter() - start:.1f} s", flush=True)
        (out / "microbench.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
