"""Diagnostics for the second blind check's worst misses (one GPU call).

    PYTHONPATH=src:. python -m benchmarks.steptime.diagnose2 --out DIR [--repeat 3] [--budget 480]

Each part runs in fresh processes (`--one PART`), the parts alternating, `--repeat` times, no
new process started once `--budget` seconds have passed (the last may run past it):

- `rnn`: multi-layer cuDNN calls. GRU and LSTM, fp32 and bf16, 1-4 layers, hidden 192 and
  512, input 128, batch 32, 64 steps. (a) the layer alone (`.to(dtype)`, input requiring grad):
  forward (grad mode on) and backward each timed with CUDA events after a sync, the median of
  15, and the host's own time inside each call (`perf_counter` around the call, before the
  end event); (b) a training step of `RnnLM` (embedding 128, the layer, a head, cross entropy,
  AdamW; bf16 under autocast as the blind cases ran) timed as a loop runs it (`window.windows`:
  5 warm-up and 3 synced steps, 8 + 1 windows of about 60 ms).
- `hf`: host cost per op. Steps whose device work is negligible (batch 1, 8 tokens, width 64,
  dropout 0.1 in train mode), loops with one sync at each end: a Hugging Face
  `GPT2LMHeadModel` built from a config, the same under a peft LoRA (r 4 on `c_attn`), a bare
  `nn` stack of the same blocks (`BareLM`), the bare stack under the same LoRA (on `qkv`), at
  2, 6 and 12 layers (fp32; 6 layers also under bf16 autocast); and bare MLPs (16 -> depth x
  64 -> 10, batch 8, SGD). Per model: forward (loss), forward and backward, the whole step
  (AdamW, SGD for the MLPs) in microseconds, and the aten ops each phase dispatches (a
  `TorchDispatchMode` count, views apart) and the module calls of a forward.

Writes DIR/diagnose2.json (environment + one record per part and run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.steptime.rnn_sizes import warmed

MODES = ("GRU", "LSTM")
LAYERS = (1, 2, 3, 4)
HIDDEN = (192, 512)
DEPTHS = (2, 6, 12)


def _rnn_layer_row(mode: str, dtype: Any, layers: int, hidden: int) -> dict[str, Any]:
    import torch
    from torch import nn

    cls = {"GRU": nn.GRU, "LSTM": nn.LSTM}[mode]
    layer = cls(128, hidden, layers, batch_first=True).to("cuda", dtype)
    x = torch.randn(32, 64, 128, device="cuda", dtype=dtype, requires_grad=True)
    fwd, bwd = warmed(layer, x)
    times: dict[str, list[float]] = {k: [] for k in ("fd", "fh", "bd", "bh")}
    for _ in range(15):
        for fn, dev, host in ((fwd, "fd", "fh"), (bwd, "bd", "bh")):
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            start = time.perf_counter()
            fn()
            times[host].append((time.perf_counter() - start) * 1e3)
            b.record()
            b.synchronize()
            times[dev].append(a.elapsed_time(b))
    med = {k: statistics.median(v) for k, v in times.items()}
    return dict(
        forward_ms=med["fd"],
        forward_host_ms=med["fh"],
        backward_ms=med["bd"],
        backward_host_ms=med["bh"],
    )


def _rnn_step_row(mode: str, amp: bool, layers: int, hidden: int) -> dict[str, Any]:
    import torch

    from benchmarks.faithful.models import RnnLM
    from benchmarks.steptime.cases import VOCAB
    from benchmarks.steptime.window import windows

    model = RnnLM(mode, layers, hidden=hidden, embed=128).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    tokens = torch.randint(0, VOCAB, (32, 64), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = model(tokens)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    synced = []
    for _ in range(8):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        synced.append(time.perf_counter() - start)
    typical = statistics.median(synced[-3:])
    per_window = max(3, min(200, round(0.060 / typical)))
    window = windows(step, per_window, 8)
    return dict(
        step_synced_ms=statistics.median(synced[5:]) * 1e3,
        steps_per_window=per_window,
        step_window_ms=[w * 1e3 for w in window],
        step_ms=statistics.median(window) * 1e3,
    )


def rnn_part() -> Iterator[dict[str, Any]]:
    import torch

    for mode in MODES:
        for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            for hidden in HIDDEN:
                for layers in LAYERS:
                    row: dict[str, Any] = dict(mode=mode, dtype=name, layers=layers, hidden=hidden)
                    row.update(batch=32, steps=64, input=128)
                    try:
                        row.update(_rnn_layer_row(mode, dtype, layers, hidden))
                        row.update(_rnn_step_row(mode, name == "bf16", layers, hidden))
                    except Exception as exc:
                        row["error"] = repr(exc)[-500:]
                    yield row


class Block:
    """A GPT-2 block of bare `nn` modules (pre-LayerNorm, SDPA attention, tanh GELU MLP,
    dropout where GPT-2 has it)."""

    def __new__(cls, width: int, heads: int, drop: float) -> Any:
        import torch.nn.functional as F
        from torch import nn

        class _Block(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
                self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
                self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
                self.drop = nn.Dropout(drop)

            def forward(self, x: Any) -> Any:
                b, t, d = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
                q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
                p = drop if self.training else 0.0
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
                x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, d)))
                h = F.gelu(self.fc(self.ln2(x)), approximate="tanh")
                return x + self.drop(self.out(h))

        return _Block()


class BareLM:
    """GPT-2's layout from bare modules: token and position embeddings, `depth` blocks, a
    final LayerNorm, a head tied to the token embedding, the shifted cross entropy."""

    def __new__(cls, depth: int, width: int = 64, vocab: int = 512, drop: float = 0.1) -> Any:
        import torch
        import torch.nn.functional as F
        from torch import nn

        class _BareLM(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(64, width)
                self.drop = nn.Dropout(drop)
                self.blocks = nn.ModuleList(Block(width, 4, drop) for _ in range(depth))
                self.ln_f = nn.LayerNorm(width)
                self.head = nn.Linear(width, vocab, bias=False)
                self.head.weight = self.wte.weight

            def forward(self, input_ids: Any) -> Any:
                pos = torch.arange(input_ids.shape[1], device=input_ids.device)
                x = self.drop(self.wte(input_ids) + self.wpe(pos))
                for block in self.blocks:
                    x = block(x)
                logits = self.head(self.ln_f(x))
                return F.cross_entropy(
                    logits[:, :-1].reshape(-1, vocab), input_ids[:, 1:].reshape(-1)
                )

        return _BareLM()


def _build(kind: str, depth: int, dev: str) -> tuple[Any, Any, Any]:
    """(model, loss function, optimizer) of one host-part model."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    if kind == "mlp":
        layers: list[Any] = [nn.Linear(16, 64), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(64, 64), nn.ReLU()]
        model = nn.Sequential(*layers, nn.Linear(64, 10)).to(dev)
        x, y = torch.randn(8, 16, device=dev), torch.randint(0, 10, (8,), device=dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        return model, lambda: F.cross_entropy(model(x), y), opt
    ids = torch.randint(0, 512, (1, 8), device=dev)
    if kind.startswith("hf"):
        import transformers

        config = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=depth, n_positions=64)
        config.vocab_size = 512
        model = transformers.GPT2LMHeadModel(config).to(dev)
        target, loss = ["c_attn"], (lambda: model(input_ids=ids, labels=ids).loss)
    else:
        model = BareLM(depth).to(dev)
        target, loss = ["qkv"], (lambda: model(ids))
    if kind.endswith("lora"):
        import peft

        lora = peft.LoraConfig(
            r=4, lora_alpha=8, lora_dropout=0.0, target_modules=target, fan_in_fan_out="hf" in kind
        )
        model = peft.get_peft_model(model, lora)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    return model, loss, torch.optim.AdamW(params, lr=1e-5)


def _counts(model: Any, loss: Any, opt: Any, amp: bool, dev: str) -> dict[str, Any]:
    """The aten ops (and views) each phase dispatches, and a forward's module calls."""
    import torch
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter[str] = Counter()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
            self.ops["view" if func.is_view else "op"] += 1
            return func(*args, **(kwargs or {}))

    calls = Counter[str]()
    hook = register_module_forward_pre_hook(lambda m, a: calls.update(["module"]))
    counted: dict[str, Any] = {}
    try:
        for phase in ("forward", "backward", "optimizer"):
            with _Count() as mode:
                if phase == "forward":
                    with torch.autocast(dev, dtype=torch.bfloat16, enabled=amp):
                        out = loss()
                    hook.remove()
                elif phase == "backward":
                    out.backward()
                else:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            counted[f"{phase}_ops"] = mode.ops["op"]
            counted[f"{phase}_views"] = mode.ops["view"]
    finally:
        hook.remove()
    counted["forward_module_calls"] = calls["module"]
    counted["trainable_tensors"] = sum(1 for p in model.parameters() if p.requires_grad)
    return counted


def _sync(dev: str) -> None:
    import torch

    if dev == "cuda":
        torch.cuda.synchronize()


def _loop_us(fn: Any, dev: str, seconds: float = 0.25) -> float:
    """Microseconds per call of a loop of calls with one sync at each end, the median of 3
    loops of about `seconds` each (after a warm-up)."""
    for _ in range(5):
        fn()
    _sync(dev)
    start = time.perf_counter()
    for _ in range(3):
        fn()
    _sync(dev)
    n = max(5, min(500, round(seconds / ((time.perf_counter() - start) / 3))))
    loops = []
    for _ in range(3):
        _sync(dev)
        start = time.perf_counter()
        for _ in range(n):
            fn()
        _sync(dev)
        loops.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(loops)


def _host_row(kind: str, depth: int, amp: bool, dev: str) -> dict[str, Any]:
    import torch

    model, loss_fn, opt = _build(kind, depth, dev)

    def loss() -> Any:
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=amp):
            return loss_fn()

    def fwd_bwd() -> None:
        loss().backward()

    def full() -> None:
        fwd_bwd()
        opt.step()
        opt.zero_grad(set_to_none=True)

    row: dict[str, Any] = dict(model=kind, depth=depth, amp=amp)
    row.update(_counts(model, loss_fn, opt, amp, dev))
    row["forward_us"] = _loop_us(loss, dev)
    row["forward_backward_us"] = _loop_us(fwd_bwd, dev)
    row["step_us"] = _loop_us(full, dev)
    return row


def hf_part(dev: str = "cuda") -> Iterator[dict[str, Any]]:
    kinds = ("hf", "hf-lora", "bare", "bare-lora")
    plan = [(kind, depth, False) for depth in DEPTHS for kind in kinds]
    plan += [(kind, 6, True) for kind in kinds]
    plan += [("mlp", depth, False) for depth in (4, 16)]
    for kind, depth, amp in plan:
        try:
            yield _host_row(kind, depth, amp, dev)
        except Exception as exc:
            yield dict(model=kind, depth=depth, amp=amp, error=repr(exc)[-500:])


def _rows(stdout: str | bytes | None) -> list[dict[str, Any]]:
    """The rows a child printed (one JSON object a line), also from a child cut off."""
    text = stdout.decode() if isinstance(stdout, bytes) else stdout or ""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", default="rnn,hf")
    parser.add_argument("--budget", type=float, default=480.0)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of the hf part")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        for row in rnn_part() if args.one == "rnn" else hf_part(args.device):
            print(json.dumps(row), flush=True)
        return
    from benchmarks.steptime.measure_gpu import _environment

    started = time.perf_counter()
    settings = dict(vars(args))
    env = _environment() if args.device == "cuda" else {"device": args.device}
    record: dict[str, Any] = {"environment": env, "settings": settings, "runs": []}
    record["settings"]["out"] = str(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    took: dict[str, float] = {}
    for repeat in range(args.repeat):
        for part in args.parts.split(","):
            left = args.budget - (time.perf_counter() - started)
            if left < took.get(part, 20.0):
                record["runs"].append({"part": part, "repeat": repeat, "error": "budget"})
                continue
            cmd = [sys.executable, "-m", "benchmarks.steptime.diagnose2", "--one", part]
            cmd += ["--device", args.device]
            begun = time.perf_counter()
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=left + 30)
                rows = _rows(done.stdout)
                error = None if done.returncode == 0 else done.stderr[-2000:]
            except subprocess.TimeoutExpired as exc:
                rows, error = _rows(exc.stdout), "timeout"
            took[part] = time.perf_counter() - begun
            run = {"part": part, "repeat": repeat, "seconds": time.perf_counter() - started}
            run.update(rows=rows, error=error)
            record["runs"].append(run)
            note = f"{len(rows)} rows" + (f", error {error[-200:]}" if error else "")
            print(f"[{repeat}] {part}: {note} at {run['seconds']:.0f} s", flush=True)
            (args.out / "diagnose2.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
