"""Measure the accuracy suite on a real CUDA GPU, one fresh process per case.

    PYTHONPATH=src:. python -m benchmarks.accuracy.measure_gpu --out DIR [--cases a,b]

Writes DIR/measured.json (environment + one record per case) and, for the cases in
`cases.TRACED`, DIR/traces.json.gz: the allocator's event trace (alloc/free with sizes and the
Python frame that asked), used to study what the CUDA runtime allocates beyond the ops.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.accuracy.cases import CASES, TRACED

if TYPE_CHECKING:
    from trainfit.measure.steps import Measured


def _environment() -> dict[str, Any]:
    import torch
    import transformers

    env: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0),
        "total_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
        "capability": list(torch.cuda.get_device_capability(0)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }
    env["nvidia_smi"] = nvidia_smi()
    return env


def nvidia_smi() -> str:
    """The card's name, driver and memory as nvidia-smi reports them (no CUDA context)."""
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError as exc:
        return f"unavailable: {exc}"
    return smi.stdout.strip()


def _compact_trace(snapshot: dict[str, Any]) -> list[list[Any]]:
    events = []
    for trace in snapshot["device_traces"]:
        for e in trace:
            frames = e.get("frames") or []
            where = "; ".join(
                f"{Path(f['filename']).name}:{f['line']}:{f['name']}" for f in frames[:6]
            )
            events.append([e["action"], e["addr"], e["size"], e.get("stream", 0), where])
    return events


def measurement_record(m: Measured) -> dict[str, Any]:
    """What the results hold of a run of three steps (`measure(spec, steps=3, warmup=0)`, all
    three timed): the allocator's peaks, the card's use after the steps and before the model
    (cudaMemGetInfo: this process's CUDA context included, the CUDA context of other processes
    too), the model's parts, and the allocated peak of each phase."""
    assert m.total_memory_bytes is not None and m.free_at_start_bytes is not None
    assert m.free_at_end_bytes is not None
    return {
        "device_name": m.device_name,
        "steps": m.steps,
        "peak_allocated_bytes": m.peak_allocated_bytes,
        "peak_reserved_bytes": m.peak_reserved_bytes,
        "device_used_bytes": m.total_memory_bytes - m.free_at_end_bytes,
        "baseline_used_bytes": m.total_memory_bytes - m.free_at_start_bytes,
        "parameter_bytes": m.parameter_bytes,
        "gradient_bytes": m.gradient_bytes,
        "optimizer_state_bytes": m.optimizer_state_bytes,
        "activation_bytes": m.activation_bytes,
        "phase_peaks": [
            {
                "iteration": p.iteration,
                "phase": p.phase,
                "peak_allocated_bytes": p.peak_allocated_bytes,
            }
            for p in m.phases
        ],
        "step_seconds": list(m.step_seconds),
        "versions": m.versions,
    }


def run_one(name: str, out_json: Path, trace_path: Path | None) -> None:
    import torch

    from trainfit.measure.steps import measure
    from trainfit.spec import TrainSpec

    if trace_path is not None:
        torch.cuda.memory._record_memory_history(max_entries=400_000, stacks="python")
    started = time.perf_counter()
    spec = TrainSpec(**CASES[name])
    record = measurement_record(measure(spec, steps=3, warmup=0, device="cuda"))
    record["case"] = name
    record["wall_seconds"] = time.perf_counter() - started
    record["segments_at_end"] = [
        {
            "size": s["total_size"],
            "pool": "small" if s["segment_type"] == "small" else "large",
            "allocated": s["allocated_size"],
        }
        for s in torch.cuda.memory_snapshot()
    ]
    if trace_path is not None:
        snap = torch.cuda.memory._snapshot()
        with gzip.open(trace_path, "wt") as fh:
            json.dump({"case": name, "events": _compact_trace(snap)}, fh)
    out_json.write_text(json.dumps(record, default=str))


def probe_context(out_json: Path) -> None:
    """Device memory in use outside the allocator after each library wakes up."""
    import torch

    def used() -> int:
        free, total = torch.cuda.mem_get_info()
        return total - free

    rows: list[dict[str, Any]] = []

    def note(what: str) -> None:
        torch.cuda.synchronize()
        rows.append(
            {
                "after": what,
                "used": used(),
                "reserved": torch.cuda.memory_reserved(),
                "allocated": torch.cuda.memory_allocated(),
            }
        )

    torch.cuda.init()
    torch.empty(1, device="cuda")
    note("first tensor (context)")
    a = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    b = a @ a
    note("fp32 matmul (cuBLAS handle + workspace)")
    c = (a.bfloat16() @ a.bfloat16()).float()
    note("bf16 matmul")
    (b.sum() + c.sum()).backward()
    note("matmul backward (autograd thread handle)")
    x = torch.randn(8, 64, 56, 56, device="cuda", requires_grad=True)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).cuda()
    conv(x).sum().backward()
    note("conv fwd+bwd fp32 (cuDNN)")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        conv(x).float().sum().backward()
    note("conv bf16")
    q = torch.randn(8, 12, 512, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    note("flash attention bf16 fwd+bwd")
    q32 = q.detach().float().requires_grad_()
    torch.nn.functional.scaled_dot_product_attention(q32, q32, q32, is_causal=True).sum().backward()
    note("efficient attention fp32 fwd+bwd")
    lstm = torch.nn.LSTM(256, 512, num_layers=2, batch_first=True).cuda()
    lstm(torch.randn(32, 128, 256, device="cuda"))[0].sum().backward()
    note("cuDNN LSTM fwd+bwd")
    emb = torch.nn.Embedding(50000, 256).cuda()
    emb(torch.randint(50000, (8, 512), device="cuda")).sum().backward()
    note("embedding fwd+bwd")
    ln = torch.nn.LayerNorm(768).cuda()
    ln(torch.randn(8, 512, 768, device="cuda")).sum().backward()
    note("layer norm fwd+bwd")
    p = [torch.randn(1000, 1000, device="cuda", requires_grad=True) for _ in range(4)]
    opt = torch.optim.AdamW(p)
    sum(t.sum() for t in p).backward()
    opt.step()
    note("AdamW foreach step")
    out_json.write_text(json.dumps({"context_probe": rows}))


def probe_sdpa(out_json: Path) -> None:
    """Which attention kernel CUDA picks for the shapes and masks the suite's models use."""
    import torch
    from torch.nn.attention import SDPBackend

    rows = []
    dev = "cuda"
    configs = [
        ("bf16 causal no mask", torch.bfloat16, 12, 12, 64, None, 0.1, True),
        ("fp32 causal no mask dropout", torch.float32, 12, 12, 64, None, 0.1, True),
        ("fp32 no mask no dropout", torch.float32, 12, 12, 64, None, 0.0, False),
        ("bf16 float mask needs grad dropout (T5)", torch.bfloat16, 8, 8, 64, "grad", 0.1, False),
        ("bf16 float mask no grad dropout", torch.bfloat16, 8, 8, 64, "float", 0.1, False),
        ("bf16 float mask needs grad no dropout", torch.bfloat16, 8, 8, 64, "grad", 0.0, False),
        ("bf16 bool mask", torch.bfloat16, 8, 8, 64, "bool", 0.0, False),
        ("bf16 gqa 32/4 heads causal", torch.bfloat16, 32, 4, 64, None, 0.0, True),
        ("bf16 gqa 32/8 head 128", torch.bfloat16, 32, 8, 128, None, 0.0, True),
        ("fp16 head 80", torch.float16, 16, 16, 80, None, 0.0, True),
        ("bf16 head 256", torch.bfloat16, 8, 8, 256, None, 0.0, True),
        ("fp32 head 80 dropout", torch.float32, 16, 16, 80, None, 0.1, False),
    ]
    for label, dtype, hq, hk, d, mask, p, causal in configs:
        q = torch.randn(2, hq, 128, d, device=dev, dtype=dtype, requires_grad=True)
        k = torch.randn(2, hk, 128, d, device=dev, dtype=dtype, requires_grad=True)
        v = torch.randn(2, hk, 128, d, device=dev, dtype=dtype, requires_grad=True)
        m = None
        if mask == "bool":
            m = torch.ones(2, 1, 128, 128, device=dev, dtype=torch.bool)
        elif mask is not None:
            m = torch.zeros(1, hq, 128, 128, device=dev, dtype=dtype, requires_grad=mask == "grad")
        try:
            choice = torch._fused_sdp_choice(q, k, v, m, p, causal, enable_gqa=hq != hk)
            name = SDPBackend(choice).name
        except Exception as exc:  # a probe records what happened
            name = f"error: {exc}"
        rows.append({"config": label, "backend": name})
    out_json.write_text(json.dumps({"sdpa_probe": rows}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", default="")
    parser.add_argument("--one", default="")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--trace", type=Path)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--probe-sdpa", action="store_true")
    args = parser.parse_args()
    if args.probe:
        probe_context(args.json)
        return
    if args.probe_sdpa:
        probe_sdpa(args.json)
        return
    if args.one:
        run_one(args.one, args.json, args.trace)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.cases.split(",") if n] or list(CASES)
    work = Path(tempfile.mkdtemp(prefix="trainfit-accuracy-"))
    results: dict[str, Any] = {"environment": _environment(), "cases": {}, "errors": {}}
    for flag, key in (("--probe", "context_probe"), ("--probe-sdpa", "sdpa_probe")):
        # each probe in a fresh process, so that libraries wake up in a known order
        path = work / f"{key}.json"
        cmd = [sys.executable, "-m", "benchmarks.accuracy.measure_gpu", "--out", str(args.out)]
        subprocess.run([*cmd, flag, "--json", str(path)], check=False)
        if path.exists():
            results[key] = json.loads(path.read_text())[key]
    if "sdpa_probe" in results:
        print(json.dumps(results["sdpa_probe"], indent=0), flush=True)
    traces: dict[str, Any] = {}
    for name in names:
        out = work / f"{name}.json"
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.accuracy.measure_gpu",
            "--out",
            str(args.out),
            "--one",
            name,
            "--json",
            str(out),
        ]
        trace = work / f"{name}.trace.json.gz"
        if name in TRACED:
            cmd += ["--trace", str(trace)]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        took = time.perf_counter() - started
        if proc.returncode != 0 or not out.exists():
            results["errors"][name] = proc.stderr[-3000:]
            print(f"{name}: FAILED ({took:.0f}s)\n{proc.stderr[-1500:]}", flush=True)
            continue
        rec = json.loads(out.read_text())
        results["cases"][name] = rec
        gib = 2**30
        print(
            f"{name}: alloc {rec['peak_allocated_bytes'] / gib:.3f} reserved "
            f"{rec['peak_reserved_bytes'] / gib:.3f} used {rec['device_used_bytes'] / gib:.3f} GiB "
            f"({took:.0f}s)",
            flush=True,
        )
        if trace.exists():
            with gzip.open(trace, "rt") as fh:
                traces[name] = json.load(fh)["events"]
            with gzip.open(args.out / "traces.json.gz", "wt") as fh:
                json.dump(traces, fh)
        (args.out / "measured.json").write_text(json.dumps(results, indent=1))
    (args.out / "measured.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
