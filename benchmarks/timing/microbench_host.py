"""`microbench`'s host costs: per op forward and backward, per op as a training step issues
them, optimizer steps, a module call, a sync, the cuDNN-backed ops and PyTorch's
Python-heavy modules."""

from __future__ import annotations

import time
from typing import Any

import torch

from benchmarks.timing.microbench_timers import _host_per_op


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
