"""Measure one training step sharded with FSDP2 over the GPUs of one host, or on one GPU with
the model states in CPU memory (FSDP2's CPUOffloadPolicy).

    torchrun --nproc_per_node=2 -m benchmarks.sharded.measure_fsdp --case NAME --out FILE
    torchrun --nproc_per_node=1 -m benchmarks.sharded.measure_fsdp --case NAME --offload --out FILE

The model is built as the accuracy harness builds it (on the CPU in fp32, trainfit's own
builder, gradient checkpointing switched on the same way); each block of the largest
ModuleList and then the root are `fully_shard`ed with MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32) (no autocast: the policy casts), AdamW with PyTorch's defaults, three
steps of trainfit's training step (forward, loss, backward, optimizer step,
zero_grad(set_to_none=True)). Per rank: peak allocated and reserved (torch.cuda), and the
device memory in use (total - free) after creating the CUDA context, after initialising NCCL
and after the steps (which also holds NCCL's buffers). Rank 0 writes the ranks' figures to
--out as JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from benchmarks.sharded.cases import spec_fields
from trainfit.models.source import build_program
from trainfit.spec import TrainSpec
from trainfit.training import StepRig, apply_settings, no_context, run_iteration


def _blocks(model: nn.Module) -> list[nn.Module]:
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    largest = max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))
    return list(largest)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True)
    parser.add_argument("--offload", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    torch.empty(0, device=dev)  # NB: the CUDA context, before NCCL's
    context_free, total = torch.cuda.mem_get_info(dev)
    dist.init_process_group("nccl", device_id=dev)
    dist.barrier()
    free0, _ = torch.cuda.mem_get_info(dev)
    spec = TrainSpec(**spec_fields(args.case))
    program = build_program(spec, "cpu")
    apply_settings(program, spec)
    model = program.model
    policy = dict(
        mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    )
    if args.offload:
        policy["offload_policy"] = CPUOffloadPolicy()
    for block in _blocks(model):
        fully_shard(block, **policy)
    fully_shard(model, **policy)
    if not args.offload:
        model.to(dev)
    for module in model.modules():  # NB: buffers (rotary tables) live on the GPU either way
        for name, buffer in module.named_buffers(recurse=False):
            module._buffers[name] = buffer.to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    rig = StepRig(program=program, optimizer=optimizer, autocast=no_context, scaler=None, spec=spec)
    batch = program.make_batch(dev, True)
    torch.cuda.reset_peak_memory_stats(dev)
    error = ""
    try:
        for _ in range(args.steps):
            run_iteration(rig, batch, lambda phase: None)
        torch.cuda.synchronize(dev)
    except torch.OutOfMemoryError as exc:
        error = f"out of memory: {str(exc).splitlines()[0]}"
    free1, _ = torch.cuda.mem_get_info(dev)
    mine = {
        "rank": rank,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(dev),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(dev),
        "device_used_bytes": total - free1,
        "context_used_bytes": total - context_free,
        "after_nccl_init_used_bytes": total - free0,
        "error": error,
    }
    ranks: list[dict[str, object]] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(ranks, mine)
    if rank == 0:
        import transformers

        record = {
            "case": args.case,
            "spec": spec_fields(args.case),
            "gpus": dist.get_world_size(),
            "offload": args.offload,
            "steps": args.steps,
            "ranks": ranks,
            "environment": {
                "date": datetime.date.today().isoformat(),
                "device": torch.cuda.get_device_name(dev),
                "total_memory_bytes": total,
                "torch": torch.__version__,
                "cuda": str(torch.version.cuda),
                "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                "transformers": transformers.__version__,
            },
        }
        Path(args.out).write_text(json.dumps(record, indent=2))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
