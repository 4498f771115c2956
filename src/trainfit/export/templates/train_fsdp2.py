"""Train with the settings `trainfit plan --export torchrun` wrote (fsdp2_<device>.json): FSDP2
(`torch.distributed.fsdp.fully_shard` on each block and then the root, a 1-D mesh, or a 2-D
(replicate, shard) mesh for fsdp2-hybrid) or DDP, with the plan's precision policy, CPU
offload, activation checkpointing, micro-batch and accumulation.

    torchrun --standalone --nproc-per-node=8 train_fsdp2.py --config fsdp2_h100.json

The model and data: `load_model` builds the config's model with random weights and a
synthetic batch through trainfit when it is installed (what `trainfit plan` traced), else
`transformers.AutoModelForCausalLM.from_pretrained(config["hub_id"])` with random token ids;
replace `load_model` and `batches` with your own. With `--out FILE` rank 0 writes each rank's
peak device memory (what benchmarks/sharded checks against the plan). `--device cpu` runs on
the CPU with gloo (a smoke test).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def load_model(config: dict, device: torch.device) -> tuple[nn.Module, Callable, Callable]:
    """(model on the CPU in fp32, make_batch(device), loss(model, batch))."""
    try:
        from trainfit.models.source import build_program
        from trainfit.spec import TrainSpec
        from trainfit.training import apply_settings
    except ImportError:
        return _load_hf(config)
    spec = TrainSpec(
        model=config["model"],
        seq_len=config.get("seq_len"),
        batch=config["micro_batch"],
        checkpointing=config["activation_checkpointing"],
        device="cpu",
    )
    program = build_program(spec, "cpu")
    apply_settings(program, spec)  # NB: gradient checkpointing as trainfit traced it
    return program.model, lambda dev: program.make_batch(dev, True), program.compute_loss


def _load_hf(config: dict) -> tuple[nn.Module, Callable, Callable]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(config["hub_id"], torch_dtype=torch.float32)
    if config["activation_checkpointing"]:
        model.gradient_checkpointing_enable({"use_reentrant": False})
    vocab = model.config.vocab_size

    def make_batch(dev: torch.device) -> dict:
        ids = torch.randint(0, vocab, (config["micro_batch"], config["seq_len"]), device=dev)
        return {"input_ids": ids, "labels": ids}

    return model, make_batch, lambda m, b: m(**b).loss


def batches(make_batch: Callable, device: torch.device) -> Iterator[dict]:
    """The micro-batches (replace with your DataLoader over a DistributedSampler)."""
    batch = make_batch(device)
    while True:
        yield batch


def blocks_of(model: nn.Module) -> list[nn.Module]:
    """The blocks of the largest ModuleList (the units trainfit's memory model shards)."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        return []
    return list(max(lists, key=lambda m: sum(p.numel() for p in m.parameters())))


def wrap(model: nn.Module, config: dict, device: torch.device) -> tuple[nn.Module, Callable]:
    """The model under the config's engine, and the autocast context of its forward."""
    precision = config["mixed_precision"]
    param_dtype = DTYPES[precision["param_dtype"]]
    if config["strategy"] == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        model.to(device)
        ids = [device.index] if device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=ids)
        if param_dtype == torch.float32:
            return wrapped, contextlib.nullcontext
        return wrapped, lambda: torch.autocast(device.type, dtype=param_dtype)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(
        device.type, tuple(config["mesh_shape"]), mesh_dim_names=tuple(config["mesh_dim_names"])
    )
    options: dict = {"mesh": mesh, "reshard_after_forward": config["reshard_after_forward"]}
    if param_dtype != torch.float32:
        options["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=param_dtype, reduce_dtype=DTYPES[precision["reduce_dtype"]]
        )
    if config["cpu_offload"]:
        options["offload_policy"] = CPUOffloadPolicy()
    for block in blocks_of(model):
        fully_shard(block, **options)
    fully_shard(model, **options)
    if not config["cpu_offload"]:
        model.to(device)
    for module in model.modules():  # NB: buffers (rotary tables) live on the device
        for name, buffer in module.named_buffers(recurse=False):
            module._buffers[name] = buffer.to(device)
    return model, contextlib.nullcontext


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="fsdp2_<device>.json from trainfit")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--out", default=None, help="write per-rank peak memory here (JSON)")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        torch.empty(0, device=device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    if dist.get_world_size() != config["world_size"]:
        raise SystemExit(
            f"the config is for {config['world_size']} processes, torchrun started "
            f"{dist.get_world_size()}"
        )
    torch.manual_seed(0)
    model, make_batch, loss_fn = load_model(config, device)
    model, autocast = wrap(model, config, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"])
    data = batches(make_batch, device)
    accum = config["grad_accum"]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses, error = [], ""
    try:
        for _ in range(args.steps):
            for index in range(accum):
                # NB: DDP all-reduces once per optimizer step (no_sync before); FSDP2
                # reduce-scatters every micro-batch, as the plan's memory and time assume
                last = index == accum - 1
                context = (
                    model.no_sync()
                    if hasattr(model, "no_sync") and not last
                    else contextlib.nullcontext()
                )
                with context:
                    with autocast():
                        loss = loss_fn(model, next(data)) / accum
                    loss.backward()
            if config.get("grad_clip"):
                torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()) * accum)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except torch.OutOfMemoryError as exc:
        error = f"out of memory: {str(exc).splitlines()[0]}"
    mine: dict = {"rank": dist.get_rank(), "losses": losses, "error": error}
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        mine.update(
            peak_allocated_bytes=torch.cuda.max_memory_allocated(device),
            peak_reserved_bytes=torch.cuda.max_memory_reserved(device),
            device_used_bytes=total - free,
        )
    ranks: list = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, mine)
    if dist.get_rank() == 0 and args.out:
        env = {"date": datetime.date.today().isoformat(), "torch": torch.__version__}
        if device.type == "cuda":
            env.update(
                device=torch.cuda.get_device_name(device),
                cuda=str(torch.version.cuda),
                nccl=".".join(map(str, torch.cuda.nccl.version())),
            )
        record = {"config": config, "steps": args.steps, "ranks": ranks, "environment": env}
        Path(args.out).write_text(json.dumps(record, indent=2))
    dist.barrier()  # NB: no rank leaves while another still talks (gloo aborts otherwise)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
