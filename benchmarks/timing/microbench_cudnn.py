"""`microbench`'s cuDNN kernels: convolutions, BatchNorm in training (by shape and by channel
count) and the LSTM."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.timing.microbench_timers import _device_time, _stream_time


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
