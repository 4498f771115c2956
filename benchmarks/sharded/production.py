"""Seed 003's production scale planned by trainfit: Qwen2.5 14B and 32B, 2048 tokens, effective
batch 64, bf16, AdamW, on A100 80GB and H100 (CPU only; modelled, not measured).

    PYTHONPATH=src:. python -m benchmarks.sharded.production   # results/production_qwen2.5.md

The same as `trainfit plan qwen2.5-32b --seq 2048 --effective-batch 64 --precision bf16
--device a100-80gb --device h100` (and 14b): each device's multi-GPU plan, with the seed's
own choice beside it (4 GPUs for 14B, 8 for 32B, batch 2 per GPU x 16 accumulation).
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import torch

from trainfit.plan.core import plan
from trainfit.spec import Precision, TrainSpec

OUT = Path(__file__).parent / "results" / "production_qwen2.5.md"
GIB = 2**30
SEED = {"qwen2.5-14b": "4 GPUs, 2 per GPU x 16", "qwen2.5-32b": "8 GPUs, 2 per GPU x 16"}


def main() -> None:
    lines = [
        "# Seed 003's production scale, planned by trainfit (modelled)",
        "",
        f"{datetime.date.today().isoformat()}, torch {torch.__version__}, CPU only: "
        "`python -m benchmarks.sharded.production` (= `trainfit plan MODEL --seq 2048 "
        "--effective-batch 64 --precision bf16 --device a100-80gb --device h100`). AdamW, 10% "
        "of each GPU kept free. Per-rank memory, collectives and step time are modelled "
        "(docs/multi-gpu.md); the seed's own setting is in the last column.",
        "",
        "| model | device | engine | GPUs x nodes | ckpt | micro x accum | GiB per GPU "
        "(budget) | engine GiB | collectives s (not hidden) | step s | instance | "
        "fewest with offload | plan wall s | seed 003 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---:|---|",
    ]
    for model in SEED:
        spec = TrainSpec(model=model, seq_len=2048, device="h100")
        start = time.perf_counter()
        result = plan(spec, 64, ("a100-80gb", "h100"), precision=Precision.BF16, jobs=1)
        wall = time.perf_counter() - start
        for d in result.devices:
            m = d.distributed
            if m is None:
                lines.append(f"| {model} | {d.device} | {d.verdict.value} | | | | | | | | | | "
                             f"{wall:.0f} | {SEED[model]} |")  # fmt: skip
                continue
            comm = "-" if m.comm is None else f"{m.comm.seconds:.2f} ({m.comm.exposed_seconds:.2f})"
            price = f" ${m.usd_per_hour:.2f}/h" if m.usd_per_hour else ""
            fewer = m.fewer_with_offload
            alt = (
                "-"
                if fewer is None
                else f"{fewer.gpus} GPU(s), {fewer.memory.total_bytes / GIB:.1f} GiB, host "
                f"{fewer.memory.host_bytes_per_node / GIB:.0f} GiB/node, {fewer.step_seconds:.0f} s"
            )
            lines.append(
                f"| {model} | {d.device} | {m.strategy.value} | {m.gpus} x {m.nodes} | "
                f"{'yes' if m.checkpointing else 'no'} | {m.micro_batch} x {m.grad_accum} | "
                f"{m.memory.total_bytes / GIB:.1f} ({m.budget_bytes / GIB:.1f}) | "
                f"{m.memory.engine_bytes / GIB:.1f} | {comm} | {m.step_seconds:.2f} | "
                f"{m.instances} x {m.instance}{price} | {alt} | {wall:.0f} | {SEED[model]} |"
            )
    lines += [
        "",
        "Neither model fits the seed's GPU count with full AdamW states in fp32 (16 bytes a "
        "parameter: 236 GB for 14B over 4 GPUs is 59 GB each before activations and FSDP2's "
        "gathered units; 524 GB for 32B over 8 is 66 GB each): trainfit plans 8 GPUs for 14B "
        "and 16 (two nodes) for 32B, or fewer with the states in host RAM.",
        "",
    ]
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
