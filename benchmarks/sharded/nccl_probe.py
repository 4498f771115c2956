"""NCCL's own device memory per rank, and its bus bandwidth at the sizes trainfit's plans move,
on the GPUs of one host: no model, only the process group and its collectives.

    torchrun --standalone --nproc-per-node=4 -m benchmarks.sharded.nccl_probe --out FILE

Per rank: device memory in use (total - free) after the CUDA context, after the eager
`init_process_group("nccl", device_id=...)`, after its first collective (a barrier) and after
each probe's collectives, with PyTorch's reserved memory taken out (`outside_allocator`).
The probes, five timed repetitions after one untimed: an all-reduce of DDP's 25 MB bucket and
of 1 GiB (bf16), and FSDP2's per-unit collectives at a 7B model's block (233M parameters: an
all-gather of the bf16 parameters, a reduce-scatter of the fp32 gradients). Bus bandwidth in
NCCL's convention (nccl-tests PERFORMANCE.md): all-reduce 2(N-1)/N x bytes / time, all-gather
and reduce-scatter (N-1)/N x the unsharded bytes / time. Rank 0 writes the ranks' figures.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

BLOCK = 233_057_792
"""Parameters of one Qwen2.5-7B decoder block (the unit FSDP2 gathers)."""
REPEATS = 5


def used(device: torch.device) -> int:
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Median seconds of `fn` over REPEATS after one warm-up call."""
    fn()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(REPEATS):
        dist.barrier()
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def probes(device: torch.device, n: int) -> dict[str, dict[str, float]]:
    """Each probe's median seconds, bus bandwidth (GB/s) and memory outside the allocator."""
    bucket = torch.ones(25 * 2**20 // 2, dtype=torch.bfloat16, device=device)
    big = torch.ones(2**30 // 2, dtype=torch.bfloat16, device=device)
    shard = -(-BLOCK // n)
    gathered = torch.empty(shard * n, dtype=torch.bfloat16, device=device)
    piece = torch.ones(shard, dtype=torch.bfloat16, device=device)
    grads = torch.ones(shard * n, dtype=torch.float32, device=device)
    out = torch.empty(shard, dtype=torch.float32, device=device)
    cases = {
        "all_reduce_25MB_bf16": (lambda: dist.all_reduce(bucket), 2 * bucket.nbytes),
        "all_reduce_1GiB_bf16": (lambda: dist.all_reduce(big), 2 * big.nbytes),
        "all_gather_7b_block_bf16": (
            lambda: dist.all_gather_into_tensor(gathered, piece),
            gathered.nbytes,
        ),
        "reduce_scatter_7b_block_fp32": (
            lambda: dist.reduce_scatter_tensor(out, grads),
            grads.nbytes,
        ),
    }
    results = {}
    for name, (fn, nbytes) in cases.items():
        seconds = timed(fn, device)
        results[name] = {
            "seconds": seconds,
            "bus_gbs": (n - 1) / n * nbytes / seconds / 1e9,
            "outside_allocator_bytes": used(device) - torch.cuda.memory_reserved(device),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    torch.empty(0, device=device)
    mine: dict[str, object] = {"rank": rank, "context_used_bytes": used(device)}
    dist.init_process_group("nccl", device_id=device)
    mine["after_init_used_bytes"] = used(device)
    dist.barrier()
    torch.cuda.synchronize(device)
    mine["after_first_collective_used_bytes"] = used(device)
    n = dist.get_world_size()
    mine["probes"] = probes(device, n)
    mine["outside_allocator_bytes"] = used(device) - torch.cuda.memory_reserved(device)
    ranks: list[object] = [None] * n
    dist.all_gather_object(ranks, mine)
    if dist.get_rank() == 0:
        record = {
            "ranks": ranks,
            "environment": {
                "date": datetime.date.today().isoformat(),
                "device": torch.cuda.get_device_name(device),
                "torch": torch.__version__,
                "cuda": str(torch.version.cuda),
                "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
            },
        }
        Path(args.out).write_text(json.dumps(record, indent=2))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
