"""Greedy generation and DPO steps on a real GPU, to check `estimate_inference` and
`--preference dpo` against.

    PYTHONPATH=src:. python -m benchmarks.inference.run_gpu --out DIR            # one H100
    PYTHONPATH=src:. python -m benchmarks.inference.run_gpu --out DIR --device cpu --tiny

Each case runs in a fresh process (a clean allocator and CUDA context):
- generation (`GEN_MODELS` x `POINTS`, bf16, random weights from the catalog configs: no
  download): the model is built on the device in bf16; then, per (batch, context) point, after
  `empty_cache()` and a peak reset, one cold `model.generate()` of `NEW_TOKENS` greedy tokens
  (min_new_tokens = max_new_tokens, no EOS stop; all-ones attention mask) records peak
  allocated and reserved and the device memory in use (cudaMemGetInfo); then the prefill alone
  (`model(ids, past_key_values=DynamicCache, use_cache=True, logits_to_keep=1)`) and the
  whole generate are timed (median of `REPEATS` after a warm-up); decode tokens/s =
  batch x (NEW_TOKENS - 1) / (generate - prefill).
- DPO (`DPO_CASES`): `trainfit.measure.measure()` (the product's path), 2 warm-up + 3 steps.

int8/int4 are not measured: the GPU box has no bitsandbytes (nor GPTQ/AWQ kernels).
Writes DIR/gen_<model>.json, DIR/dpo_<case>.json and DIR/environment.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GEN_MODELS = ("qwen2-0.5b", "llama-3.2-1b", "gpt2")
POINTS = ((1, 512), (8, 1024))
"""(batch, context) points of each model."""
NEW_TOKENS = 64
REPEATS = 3
DPO_CASES: dict[str, dict[str, Any]] = {
    "qwen2-0.5b-dpo-model": dict(
        model="qwen2-0.5b", batch=2, seq_len=512, precision="bf16", preference="dpo"
    ),
    "qwen2-0.5b-dpo-precomputed": dict(
        model="qwen2-0.5b",
        batch=2,
        seq_len=512,
        precision="bf16",
        preference="dpo",
        reference="precomputed",
    ),
    "gpt2-dpo-model": dict(model="gpt2", batch=4, seq_len=512, precision="bf16", preference="dpo"),
}
TINY_POINTS = ((1, 32), (2, 64))
TINY_NEW_TOKENS = 8


def tiny_model(where: Path) -> str:
    """A tiny Qwen2-shaped config directory for the CPU dry run."""
    from transformers import Qwen2Config

    Qwen2Config(
        vocab_size=4000,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    ).save_pretrained(where)
    return str(where)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _memory(device: str) -> dict[str, int | None]:
    import torch

    if not device.startswith("cuda"):
        return {"peak_allocated": None, "peak_reserved": None, "used": None, "reserved": None}
    free, total = torch.cuda.mem_get_info()
    return {
        "peak_allocated": torch.cuda.max_memory_allocated(),
        "peak_reserved": torch.cuda.max_memory_reserved(),
        "used": total - free,
        "reserved": torch.cuda.memory_reserved(),
    }


def _other_processes() -> int | None:
    """Memory other processes hold on the visible GPU (NVML's process list), read before this
    process makes its CUDA context; None without NVML."""
    import os

    try:
        import pynvml
    except ImportError:
        return None
    pynvml.nvmlInit()
    try:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        if visible.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(visible))
        else:
            handle = pynvml.nvmlDeviceGetHandleByUUID(visible)
        processes = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return sum(p.usedGpuMemory or 0 for p in processes)
    finally:
        pynvml.nvmlShutdown()


def run_generation(model_name: str, device: str, points: tuple, new_tokens: int) -> dict:
    """Build `model_name` on `device` in bf16 and measure each (batch, context) point."""
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    from trainfit.models.source import build_program
    from trainfit.spec import TrainSpec

    config = build_program(TrainSpec(model=model_name), "meta").model.config
    config.use_cache = True
    baseline_used = other_processes = None
    if device.startswith("cuda"):
        other_processes = _other_processes()  # NB: before this process's CUDA context
        free, total = torch.cuda.mem_get_info()
        baseline_used = total - free
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    _sync(device)
    weights = sum(t.nbytes for t in (*model.parameters(), *model.buffers()))
    out: dict[str, Any] = {"model": model_name, "weight_bytes": weights, "points": []}
    vocab = config.vocab_size
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    for batch, context in points:
        if limit is not None and context + new_tokens > limit:
            context = limit - new_tokens  # NB: GPT-2 holds 1024 positions: 960 + 64
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        ids = torch.randint(vocab, (batch, context), device=device)
        mask = torch.ones_like(ids)
        kwargs = dict(
            attention_mask=mask,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            use_cache=True,
        )
        with torch.no_grad():
            generated = model.generate(ids, **kwargs)
        _sync(device)
        memory = _memory(device)
        assert generated.shape == (batch, context + new_tokens), generated.shape

        def prefill(ids: Any = ids, mask: Any = mask) -> None:
            with torch.no_grad():
                model(
                    input_ids=ids,
                    attention_mask=mask,
                    past_key_values=DynamicCache(config=model.config),
                    use_cache=True,
                    logits_to_keep=1,
                )

        def generate(ids: Any = ids, kwargs: dict[str, Any] = kwargs) -> None:
            with torch.no_grad():
                model.generate(ids, **kwargs)

        timings = {}
        for name, fn in (("prefill", prefill), ("generate", generate)):
            fn()
            _sync(device)
            runs = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                fn()
                _sync(device)
                runs.append(time.perf_counter() - start)
            timings[name] = statistics.median(runs)
        decode = max(1e-9, timings["generate"] - timings["prefill"])
        out["points"].append(
            {
                "batch": batch,
                "context": context,
                "new_tokens": new_tokens,
                **memory,
                "baseline_used": baseline_used,
                "other_processes": other_processes,
                "prefill_seconds": timings["prefill"],
                "generate_seconds": timings["generate"],
                "decode_seconds_per_token": decode / (new_tokens - 1),
                "decode_tokens_per_second": batch * (new_tokens - 1) / decode,
            }
        )
        del ids, mask, generated, prefill, generate
    return out


def run_dpo(case: str, device: str, model: str | None) -> dict:
    """One DPO case through `trainfit.measure.measure()`."""
    from trainfit.measure import measure
    from trainfit.spec import TrainSpec

    kwargs = dict(DPO_CASES[case])
    if model is not None:
        kwargs.update(model=model, seq_len=32, precision="fp32")
    spec = TrainSpec(**kwargs, device="h100" if device.startswith("cuda") else "cpu")
    measured = measure(spec, steps=3, warmup=2, device=device)
    return {"case": case, "spec": kwargs, "measured": measured.to_dict()}


def environment(device: str) -> dict[str, Any]:
    import torch
    import transformers

    env: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
    }
    if device.startswith("cuda"):
        env["card"] = torch.cuda.get_device_name()
        try:
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
        except OSError:
            env["driver"] = "unknown"
    return env


def _child(args: argparse.Namespace) -> None:
    out = Path(args.out)
    if args.gen:
        model = args.tiny_model or args.gen
        points = TINY_POINTS if args.tiny_model else POINTS
        new = TINY_NEW_TOKENS if args.tiny_model else NEW_TOKENS
        result = run_generation(model, args.device, points, new)
        result["model"] = args.gen
        result["built_from"] = model
        (out / f"gen_{args.gen}.json").write_text(json.dumps(result, indent=2))
    else:
        result = run_dpo(args.dpo, args.device, args.tiny_model)
        (out / f"dpo_{args.dpo}.json").write_text(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny config (CPU dry run)")
    parser.add_argument("--gen", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dpo", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tiny-model", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.gen or args.dpo:
        _child(args)
        return
    (out / "environment.json").write_text(json.dumps(environment(args.device), indent=2))
    extra = ["--device", args.device]
    if args.tiny:
        extra += ["--tiny-model", tiny_model(out / "tiny-config")]
    jobs = [["--gen", m] for m in GEN_MODELS] + [["--dpo", c] for c in DPO_CASES]
    started = time.perf_counter()
    for job in jobs:
        command = [sys.executable, "-m", "benchmarks.inference.run_gpu", "--out", str(out)]
        done = subprocess.run(command + job + extra, env=os.environ, check=False)
        print(f"{' '.join(job)}: exit {done.returncode} ({time.perf_counter() - started:.0f} s)")
        if done.returncode:
            (out / f"failed_{job[1]}.txt").write_text(f"exit {done.returncode}\n")


if __name__ == "__main__":
    main()
