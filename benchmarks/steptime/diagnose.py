"""Diagnostic measurements for the step-time model's two blind misses (one GPU call).

    PYTHONPATH=src:. python -m benchmarks.steptime.diagnose --out DIR [--repeat 3]

Each part runs in fresh processes (`--one PART`), `--repeat` times:

- `rnn`: cuDNN's recurrent layers (LSTM, GRU, RNN_TANH; one layer, input 128, fp32, bf16)
  over the hidden size, at batch 32 and 64 and two sequence lengths: the forward (grad mode on) and
  the backward timed with CUDA events, the median of 15 repetitions each. The per-step cost is the
  difference between the two lengths over their difference in steps.
- `host`: steps whose device work is tiny (batch 16), timed as loops of 200 calls with one
  sync at each end, so the wall time per call is the host's cost: the forward alone (loss
  computed, graph dropped), forward and backward, the optimizer's step alone (gradients kept),
  for MLPs of width 128 at several depths (fp32 and under bf16 autocast) and a chain of
  elementwise layers (no matmul, few views), with SGD, SGD-momentum, Adam and AdamW.

Writes DIR/diagnose.json (environment + one record per part and run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.steptime.rnn_sizes import warmed

HIDDEN = (64, 128, 192, 256, 320, 384, 512, 768, 1024)
MODES = ("LSTM", "GRU", "RNN_TANH")


def _events_ms(fn: Any, reps: int) -> float:
    import torch

    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def _time_rnn(layer: Any, x: Any) -> tuple[float, float]:
    fwd, bwd = warmed(layer, x)
    f_times, b_times = [], []
    for _ in range(15):
        f_times.append(_events_ms(fwd, 1))
        b_times.append(_events_ms(bwd, 1))
    return statistics.median(f_times), statistics.median(b_times)


def rnn_part() -> list[dict[str, Any]]:
    import torch
    from torch import nn

    out = []
    classes = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN_TANH": nn.RNN}
    for mode, dtype, hidden, batch in itertools.product(
        MODES, (torch.float32, torch.bfloat16), HIDDEN, (32, 64)
    ):
        layer = classes[mode](128, hidden, 1, batch_first=True).to("cuda", dtype)
        for steps in (48, 144):
            x = torch.randn(batch, steps, 128, device="cuda", dtype=dtype, requires_grad=True)
            forward_ms, backward_ms = _time_rnn(layer, x)
            out.append(
                dict(
                    mode=mode,
                    dtype=str(dtype).removeprefix("torch."),
                    hidden=hidden,
                    batch=batch,
                    steps=steps,
                    forward_ms=forward_ms,
                    backward_ms=backward_ms,
                )
            )
    return out


def _mlp(depth: int, width: int = 128) -> Any:
    """32 -> `depth` x `width` (ReLU) -> 10, a bare nn.Sequential (as the GPU ran it)."""
    from torch import nn

    layers: list[Any] = [nn.Linear(32, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def _traced_mlp(depth: int, width: int = 128) -> Any:
    """The same layers inside `models.MLP` for trainfit (its forward takes `x`; one module
    call more than the GPU ran)."""
    from benchmarks.steptime.models import MLP

    return MLP((32, *([width] * depth)), 10)


class Chain:
    """`depth` elementwise layers x = tanh(x * w + b), w and b vectors."""

    def __new__(cls, depth: int) -> Any:
        import torch
        from torch import nn

        class _Chain(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w = nn.ParameterList([nn.Parameter(torch.ones(32)) for _ in range(depth)])
                self.b = nn.ParameterList([nn.Parameter(torch.zeros(32)) for _ in range(depth)])
                self.head = nn.Linear(32, 10)

            def forward(self, x: Any) -> Any:
                for w, b in zip(self.w, self.b, strict=True):
                    x = torch.tanh(x * w + b)
                return self.head(x)

        return _Chain()


def mlp2x128() -> Any:
    return _traced_mlp(2)


def mlp4x128() -> Any:
    return _traced_mlp(4)


def mlp8x128() -> Any:
    return _traced_mlp(8)


def mlp12x128() -> Any:
    return _traced_mlp(12)


def mlp16x128() -> Any:
    return _traced_mlp(16)


def mlp4x2048() -> Any:
    return _traced_mlp(4, 2048)


def chain4() -> Any:
    return Chain(4)


def chain12() -> Any:
    return Chain(12)


FACTORIES = {
    "mlp2x128": "mlp2x128",
    "mlp4x128": "mlp4x128",
    "mlp8x128": "mlp8x128",
    "mlp12x128": "mlp12x128",
    "mlp16x128": "mlp16x128",
    "mlp8x128-bf16": "mlp8x128",
    "mlp4x2048-bf16": "mlp4x2048",
    "chain4": "chain4",
    "chain12": "chain12",
}
"""The host part's models: name -> the factory in this module trainfit traces (input x of
16 x 32, 10 classes; `-bf16` under bf16 autocast)."""
OPTIMIZERS = {"sgd": "sgd", "sgdm": "sgd-momentum", "adam": "adam", "adamw": "adamw"}


def _loop_us(fn: Any, n: int = 200) -> float:
    import torch

    for _ in range(10):
        fn()
    best = []
    for _ in range(3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        best.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(best)


def _host_row(name: str, model: Any, amp: bool) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    x = torch.randn(16, 32, device="cuda")
    y = torch.randint(0, 10, (16,), device="cuda")

    def loss() -> Any:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            return F.cross_entropy(model(x), y)

    def fwd_bwd() -> None:
        loss().backward()

    row: dict[str, Any] = dict(
        model=name,
        tensors=len(list(model.parameters())),
        forward_us=_loop_us(loss),
        forward_backward_us=_loop_us(fwd_bwd),
    )
    for opt_name, make in (
        ("sgd", lambda p: torch.optim.SGD(p, lr=1e-3)),
        ("sgdm", lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9)),
        ("adam", lambda p: torch.optim.Adam(p, lr=1e-5)),
        ("adamw", lambda p: torch.optim.AdamW(p, lr=1e-5)),
    ):
        opt = make(model.parameters())
        fwd_bwd()
        row[f"{opt_name}_step_us"] = _loop_us(opt.step)

        def full(opt: Any = opt) -> None:
            fwd_bwd()
            opt.step()
            opt.zero_grad(set_to_none=True)

        row[f"{opt_name}_full_us"] = _loop_us(full)
    return row


def host_part() -> list[dict[str, Any]]:
    import torch

    out = []
    models: list[tuple[str, Any, bool]] = []
    for depth in (2, 4, 8, 12, 16):
        models.append((f"mlp{depth}x128", lambda d=depth: _mlp(d), False))
    models.append(("mlp8x128-bf16", lambda: _mlp(8), True))
    models.append(("mlp4x2048-bf16", lambda: _mlp(4, 2048), True))
    for depth in (4, 12):
        models.append((f"chain{depth}", lambda d=depth: Chain(d), False))
    for name, factory, amp in models:
        torch.manual_seed(0)
        out.append(_host_row(name, factory().cuda(), amp))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", default="host,rnn")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        rows = rnn_part() if args.one == "rnn" else host_part()
        print(json.dumps(rows))
        return
    from benchmarks.steptime.measure_gpu import _environment

    record: dict[str, Any] = {"environment": _environment(), "runs": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for repeat in range(args.repeat):
        for part in args.parts.split(","):
            cmd = [sys.executable, "-m", "benchmarks.steptime.diagnose", "--one", part]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
            rows = (
                json.loads(done.stdout.strip().splitlines()[-1])
                if done.returncode == 0
                else {"error": done.stderr[-2000:]}
            )
            record["runs"].append({"part": part, "repeat": repeat, "rows": rows})
            print(f"[{repeat}] {part}: {'error' if 'error' in rows else len(rows)}", flush=True)
            (args.out / "diagnose.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
