"""Time data-parallel training steps with DDP on the GPUs at hand (torchrun).

    torchrun --nproc-per-node N -m benchmarks.timing.measure_ddp --out DIR

Each case (`DDP_CASES`) runs with the micro-batch of its spec on every rank, one micro-batch
per rank per step (the effective batch is N x micro-batch), model built on the card,
`DistributedDataParallel` with its defaults (25 MB buckets), 3 warm-up and 10 timed steps,
all ranks synchronised after each. Rank 0 writes DIR/ddp_<N>.json. With N = 1 the same loop
runs without DDP (the single-GPU baseline).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

DDP_CASES: dict[str, dict[str, Any]] = {
    "gpt2-bf16": dict(model="gpt2", batch=8, seq_len=512, precision="bf16"),
    "gpt2-medium-bf16": dict(model="gpt2-medium", batch=8, seq_len=512, precision="bf16"),
    "tinyllama-bf16": dict(model="tinyllama-1.1b", batch=4, seq_len=1024, precision="bf16"),
    "resnet50-bf16": dict(model="resnet-50", batch=64, precision="bf16"),
    "bert-base-fp32": dict(model="bert-base-uncased", batch=16, seq_len=512, precision="fp32"),
}


def _allreduce(dev: Any, world: int) -> list[dict[str, float]]:
    """Seconds per NCCL all-reduce of fp32 buffers of DDP's bucket size and larger, 20 back
    to back; bus bandwidth as nccl-tests defines it (2(N-1)/N x bytes / time)."""
    import torch
    import torch.distributed as dist

    out = []
    for mib in (1, 25, 100, 400):
        x = torch.ones(mib * 2**18, device=dev)
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize(dev)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(x)
        torch.cuda.synchronize(dev)
        seconds = (time.perf_counter() - start) / 20
        nbytes = x.numel() * 4
        out.append(
            {
                "bytes": nbytes,
                "seconds": seconds,
                "bus_gbs": 2 * (world - 1) / world * nbytes / seconds / 1e9,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--allreduce", action="store_true", help="time NCCL all-reduce of DDP-bucket sizes only"
    )
    args = parser.parse_args()
    import torch
    import torch.distributed as dist

    from trainfit.measure.steps import device_rig
    from trainfit.spec import TrainSpec
    from trainfit.training import run_iteration

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    if world > 1:
        dist.init_process_group("nccl")
    dev = torch.device("cuda", local)
    result: dict[str, Any] = {
        "world_size": world,
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "cases": {},
    }
    if args.allreduce:
        result["allreduce"] = _allreduce(dev, world)
        if rank == 0:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            Path(args.out, f"allreduce_{world}.json").write_text(json.dumps(result, indent=1))
            print(json.dumps(result["allreduce"], indent=1))
        dist.destroy_process_group()
        return
    for name, kwargs in DDP_CASES.items():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        spec = TrainSpec(**kwargs)
        rig, _ = device_rig(spec, dev, build_on="device")
        if world > 1:
            ddp = torch.nn.parallel.DistributedDataParallel(rig.program.model, device_ids=[local])
            rig.program = dataclasses.replace(rig.program, model=ddp)
        batch = rig.program.make_batch(dev, True)
        times = []
        for i in range(3 + args.steps):
            torch.cuda.synchronize(dev)
            if world > 1:
                dist.barrier()
            start = time.perf_counter()
            run_iteration(rig, batch)
            torch.cuda.synchronize(dev)
            if i >= 3:
                times.append(time.perf_counter() - start)
        result["cases"][name] = {"step_seconds": times, "median": statistics.median(times)}
        if rank == 0:
            print(f"{name}: {statistics.median(times) * 1000:.1f} ms/step on {world}", flush=True)
        del rig, batch
        torch.cuda.empty_cache()
    if rank == 0:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, f"ddp_{world}.json").write_text(json.dumps(result, indent=1))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
