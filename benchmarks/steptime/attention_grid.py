"""Fused attention across head sizes and lengths: device time from the profiler against
trainfit's roofline, for the attention-heavy steps the blind sets found under-timed.

    # on the GPU: DIR/attention_grid.json
    PYTHONPATH=src:. python -m benchmarks.steptime.attention_grid --out DIR
    # on the GPU: the few-heads rows (DIR/attention_parallel.json) and the sums (DIR/sums.json)
    PYTHONPATH=src:. python -m benchmarks.steptime.attention_grid --parallel --out DIR
    # here: each shape's predicted and profiled device time, forward and backward
    PYTHONPATH=src:. python -m benchmarks.steptime.attention_grid --table DIR/attention_grid.json

Device time is the sum of the kernels torch.profiler records over 5 calls (after 3 warm-up
calls), per call, as in `conv_grid.py`. Each call is `F.scaled_dot_product_attention` on
(batch, heads, length, head size) tensors, PyTorch's choice of kernel, 1024 channels
(heads x head size) and 16,384 tokens (batch x length): its forward alone, then its forward
and backward (all three inputs' gradients); backward is the difference. The grid: fp32, bf16
and fp16; head sizes 32, 64 and 128; lengths 128 to 4096; not causal, causal, and causal with
dropout 0.1. The aten ops that ran are recorded by name (the kernel PyTorch chose).

The few-heads rows (`--parallel`) keep head size 64 and lengths 512-2048 but run 1 to 256
(batch x heads) attention problems a call, in fp32 and bf16: the grid's calls fill the GPU
many times over, a micro-batch of one sequence with 12 heads does not. The same run times
`sum` over the first dimension of (rows, columns) matrices (a linear layer's bias gradient).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.steptime.conv_grid import _device_seconds, _passes

DTYPES = ("fp32", "bf16", "fp16")
HEAD_SIZES = (32, 64, 128)
LENGTHS = (128, 256, 512, 1024, 2048, 4096)
VARIANTS = (("full", False, 0.0), ("causal", True, 0.0), ("causal-dropout", True, 0.1))
CHANNELS = 1024
TOKENS = 16384


def _torch_dtype(name: str) -> Any:
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def shape(head: int, length: int) -> tuple[int, int, int, int]:
    """(batch, heads, length, head size) of a grid row."""
    return (TOKENS // length, CHANNELS // head, length, head)


def _op_names(fn: Any) -> list[str]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages() if "attention" in e.key.lower()})


def _row(
    dtype_name: str,
    head: int,
    length: int,
    variant: tuple[str, bool, float],
    dims: tuple[int, ...] | None = None,
) -> dict:
    import torch
    import torch.nn.functional as F

    name, causal, dropout = variant
    dims = dims or shape(head, length)
    q, k, v = (
        torch.randn(dims, device="cuda", dtype=_torch_dtype(dtype_name), requires_grad=True)
        for _ in range(3)
    )

    def forward() -> Any:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal)

    forward_s, backward_s = _passes(forward)
    return {
        "dtype": dtype_name,
        "head": head,
        "length": length,
        "variant": name,
        "shape": list(dims),
        "forward_s": forward_s,
        "backward_s": backward_s,
        "ops": _op_names(lambda: forward().sum().backward()),
    }


def measure() -> dict[str, Any]:
    import torch

    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "rows": [],
    }
    for dtype in DTYPES:
        for head in HEAD_SIZES:
            for length in LENGTHS:
                for variant in VARIANTS:
                    record["rows"].append(_row(dtype, head, length, variant))
    return record


PARALLEL = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Attention problems (batch x heads) a call in the few-heads rows."""
SUMS = tuple((r, c) for r in (512, 2048, 8192, 32768) for c in (256, 768, 3072))


def measure_parallel() -> dict[str, Any]:
    import torch

    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "rows": [],
    }
    for dtype in ("fp32", "bf16"):
        for length in (512, 1024, 2048):
            for problems in PARALLEL:
                heads = min(problems, 16)
                dims = (problems // heads, heads, length, 64)
                for variant in VARIANTS:
                    record["rows"].append(_row(dtype, 64, length, variant, dims))
    return record


def measure_sums() -> dict[str, Any]:
    import torch

    rows = []
    for dtype in ("fp32", "bf16"):
        for r, c in SUMS:
            x = torch.randn(r, c, device="cuda", dtype=_torch_dtype(dtype))
            seconds = _device_seconds(lambda x=x: x.sum(0))
            rows.append({"dtype": dtype, "shape": [r, c], "seconds": seconds})
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}


def row_costs(row: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The row's forward and backward ops as trainfit's trace counts them for an H100: the
    kernel routing of `trace.kernels.attention.CudaAttention`, each op's `OpCost`."""
    import torch
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from trainfit.trace.costs import OpKind, op_cost
    from trainfit.trace.kernels.attention import CudaAttention

    class Costs(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[Any] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            cost = op_cost(func, args, kwargs or {}, out)
            if cost.kind is OpKind.ATTENTION:
                self.ops.append(cost)
            return out

    causal = row["variant"] != "full"
    dropout = 0.1 if row["variant"] == "causal-dropout" else 0.0
    with FakeTensorMode(), CudaAttention((9, 0)).installed():
        q, k, v = (
            torch.empty(row["shape"], dtype=_torch_dtype(row["dtype"]), requires_grad=True)
            for _ in range(3)
        )
        with Costs() as forward:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal)
        with Costs() as backward:
            out.backward(torch.empty_like(out))
    return forward.ops, backward.ops


def predicted(row: dict[str, Any], cal: Any = None) -> tuple[float, float]:
    """trainfit's modelled device seconds of the row's forward and backward on the H100."""
    from trainfit.hardware.catalog import get_device
    from trainfit.spec import Precision, TrainSpec
    from trainfit.timing.constants import calibration
    from trainfit.timing.step import Rates
    from trainfit.trace.costs import Phase

    precision = {"fp16": Precision.FP16, "bf16": Precision.BF16}.get(row["dtype"], Precision.FP32)
    rates = Rates(
        get_device("h100"), TrainSpec(model="gpt2", precision=precision), cal or calibration()
    )
    forward, backward = row_costs(row)
    return (
        sum(rates.time(op, Phase.FORWARD).seconds for op in forward),
        sum(rates.time(op, Phase.BACKWARD).seconds for op in backward),
    )


def table(record: dict[str, Any]) -> list[str]:
    lines = [
        "| dtype | head | length | variant | kernel | forward us: model / profiled | ratio | "
        "backward us: model / profiled | ratio |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    ratios: dict[str, list[float]] = {}
    for row in record["rows"]:
        fwd, bwd = predicted(row)
        rf, rb = fwd / row["forward_s"], bwd / row["backward_s"]
        ratios.setdefault(row["dtype"], []).extend([rf, rb])
        kernel = ", ".join(op.removeprefix("aten::") for op in row["ops"])
        lines.append(
            f"| {row['dtype']} | {row['head']} | {row['length']} | {row['variant']} | {kernel} | "
            f"{fwd * 1e6:.0f} / {row['forward_s'] * 1e6:.0f} | {rf:.2f} | "
            f"{bwd * 1e6:.0f} / {row['backward_s'] * 1e6:.0f} | {rb:.2f} |"
        )
    lines.append("")
    for key, values in ratios.items():
        lines.append(f"- {key}: median ratio {statistics.median(values):.2f} over {len(values)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path)
    parser.add_argument("--parallel", action="store_true")
    args = parser.parse_args()
    if args.parallel:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sums.json").write_text(json.dumps(measure_sums(), indent=1) + "\n")
        record = measure_parallel()
        (args.out / "attention_parallel.json").write_text(json.dumps(record, indent=1) + "\n")
        print("done", flush=True)
        return
    if args.table:
        print("\n".join(table(json.loads(args.table.read_text()))))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "attention_grid.json").write_text(json.dumps(measure(), indent=1) + "\n")
    print("done", flush=True)


if __name__ == "__main__":
    main()
