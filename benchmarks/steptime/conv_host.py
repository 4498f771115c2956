"""What a cuDNN convolution costs the host, by shape: the kernels it launches and the time its
call takes to issue, forward and backward, for the ResNet steps whose period grows with the
micro-batch while their kernels stay below it (`results/batch_sweep_h100`).

    # on the GPU: DIR/conv_host.json
    PYTHONPATH=src:. python -m benchmarks.steptime.conv_host --out DIR
    # here: each shape's measured host time and kernels against the model's host cost
    PYTHONPATH=src:. python -m benchmarks.steptime.conv_host DIR/conv_host.json

Each row is one of ResNet-18's convolutions (its stem, 3 x 3 and 1 x 1 layers at their
strides) on a batch of images, fp32 (TF32, PyTorch's default for cuDNN) and bf16, in one
process: `F.conv2d` (the forward) and `aten.convolution_backward` (the input's and the
weight's gradients as autograd asks for them: the stem's weight gradient alone) issued 40
times back to back without a synchronisation after 5 warm-up calls (the host's seconds per
call: the device runs behind, the launch queue never fills); the kernels one call launches
are counted under torch.profiler.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

# (name, C_in, C_out, kernel, stride, input side at 224 px)
LAYERS = (
    ("stem", 3, 64, 7, 2, 224),
    ("l1", 64, 64, 3, 1, 56),
    ("l2-down", 64, 128, 3, 2, 56),
    ("l2-skip", 64, 128, 1, 2, 56),
    ("l2", 128, 128, 3, 1, 28),
    ("l3", 256, 256, 3, 1, 14),
    ("l4", 512, 512, 3, 1, 7),
)
IMAGES = (32, 64, 112, 224)
BATCHES = (8, 32, 128)


def _issue_seconds(fn: Any, calls: int = 40) -> float:
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    issued = time.perf_counter() - started
    torch.cuda.synchronize()
    return issued / calls


def _kernels(fn: Any) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def _row(layer: tuple[Any, ...], image: int, batch: int, dtype_name: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    name, c_in, c_out, k, stride, side = layer
    side = max(1, side * image // 224)
    dtype = torch.float32 if dtype_name == "fp32" else torch.bfloat16
    x = torch.randn(batch, c_in, side, side, device="cuda", dtype=dtype)
    w = torch.randn(c_out, c_in, k, k, device="cuda", dtype=dtype)
    padding = k // 2
    out = F.conv2d(x, w, stride=stride, padding=padding)
    grad = torch.randn_like(out)
    aten = torch.ops.aten

    def forward() -> Any:
        return F.conv2d(x, w, stride=stride, padding=padding)

    def backward() -> Any:
        return aten.convolution_backward(
            grad,
            x,
            w,
            None,
            [stride] * 2,
            [padding] * 2,
            [1, 1],
            False,
            [0, 0],
            1,
            [layer[0] != "stem", True, False],
        )

    return {
        "layer": name,
        "dtype": dtype_name,
        "input": [batch, c_in, side, side],
        "weight": [c_out, c_in, k, k],
        "stride": stride,
        "padding": padding,
        "forward_host_s": _issue_seconds(forward),
        "backward_host_s": _issue_seconds(backward),
        "forward_kernels": _kernels(forward),
        "backward_kernels": _kernels(backward),
    }


def measure() -> dict[str, Any]:
    import torch

    torch.backends.cudnn.benchmark = False
    rows = [
        _row(layer, image, batch, dtype)
        for dtype in ("fp32", "bf16")
        for layer in LAYERS
        for image in IMAGES
        for batch in BATCHES
    ]
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("record", nargs="?", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "conv_host.json").write_text(json.dumps(measure(), indent=1) + "\n")
        print("done", flush=True)
        return
    for row in json.loads(args.record.read_text())["rows"]:
        print(
            f"{row['dtype']} {row['layer']:8s} {row['input']!s:20s} "
            f"fwd {row['forward_host_s'] * 1e6:6.1f} us x{row['forward_kernels']}  "
            f"bwd {row['backward_host_s'] * 1e6:6.1f} us x{row['backward_kernels']}"
        )


if __name__ == "__main__":
    main()
