"""Where a DDP rank's memory goes: one case of the exported template's DDP step on this host's
GPUs, with the allocator's history recorded on rank 0.

    torchrun --standalone --nproc-per-node=2 benchmarks/sharded/ddp_memory.py \
        --config CONFIG.json --init meta|cpu --out OUT.json

The model, batch, loss and DDP wrapping are the template's own (`load_model`, `wrap` of
src/trainfit/export/templates/train_fsdp2.py; `--init meta` materialises a model built on the
meta device as `trainfit plan --export torchrun`'s script does, `--init cpu` builds it on the
CPU and moves it, as the 2-GPU runs did). Each of `--steps` steps is split into its forward,
backward and optimizer phases; the allocator's peak is read after each, and every allocation
is labelled with its phase (`torch.cuda.memory._set_memory_metadata`). At the end rank 0
replays its recorded allocations, finds the allocated peak and writes what was alive there,
grouped by phase label and the allocation's top Python frames.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import importlib.util
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

TEMPLATE = Path(__file__).parents[2] / "src/trainfit/export/templates/train_fsdp2.py"
SKIP = ("torch/utils/_contextlib", "torch/nn/modules/module.py", "torch/_tensor.py")
"""Frames left out of a block's summary (wrappers that say nothing of the owner)."""


def template():
    spec = importlib.util.spec_from_file_location("train_fsdp2", TEMPLATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def label(text: str) -> None:
    if hasattr(torch.cuda.memory, "_set_memory_metadata"):
        torch.cuda.memory._set_memory_metadata(text)


def frames_of(frames: list) -> list[str]:
    kept = []
    for f in frames or []:
        name = f.get("filename", "")
        if any(s in name for s in SKIP) or name.startswith("<"):
            continue
        short = "/".join(name.split("/")[-2:])
        kept.append(f"{short}:{f.get('line')}:{f.get('name')}")
        if len(kept) == 4:
            break
    return kept


def peak_live(trace: list, device_index: int) -> dict:
    """Replay the recorded allocations; what was alive at the allocated peak."""
    live: dict = {}
    total = best = 0
    best_at = -1
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            total += e["size"]
            if total > best:
                best, best_at = total, i
        elif e["action"] == "free_completed" and e["addr"] in live:
            total -= live.pop(e["addr"])
    live = {}
    for e in trace[: best_at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    groups: dict = collections.defaultdict(lambda: [0, 0])
    phases: dict = collections.defaultdict(int)
    sizes: dict = collections.defaultdict(lambda: [0, 0])
    for e in live.values():
        meta = e.get("user_metadata", "")
        key = (meta, tuple(frames_of(e.get("frames", []))))
        groups[key][0] += e["size"]
        groups[key][1] += 1
        phases[meta] += e["size"]
        sizes[e["size"]][0] += e["size"]
        sizes[e["size"]][1] += 1
    top = sorted(groups.items(), key=lambda kv: -kv[1][0])[:40]
    at = trace[best_at] if best_at >= 0 else {}
    return {
        "replayed_peak_bytes": best,
        "events": len(trace),
        "peak_event_index": best_at,
        "peak_event_label": at.get("user_metadata", ""),
        "peak_event_frames": frames_of(at.get("frames", [])),
        "live_by_label": dict(sorted(phases.items(), key=lambda kv: -kv[1])),
        "live_largest_sizes": [
            {"size": s, "bytes": v[0], "count": v[1]}
            for s, v in sorted(sizes.items(), key=lambda kv: -kv[1][0])[:25]
        ],
        "live_groups": [
            {"label": k[0], "frames": list(k[1]), "bytes": v[0], "count": v[1]} for k, v in top
        ],
    }


def parameter_facts(model: torch.nn.Module) -> dict:
    params = list(model.parameters())
    storages = {p.data_ptr() for p in params}
    named = dict(model.named_parameters(remove_duplicate=False))
    return {
        "parameters": len(params),
        "elements": sum(p.numel() for p in params),
        "distinct_storages": len(storages),
        "named_with_duplicates": len(named),
    }


def phase(name: str, dev: torch.device, fn, record: dict):
    label(name)
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    before = torch.cuda.memory_allocated(dev)
    out = fn()
    torch.cuda.synchronize(dev)
    record[name] = {
        "allocated_before": before,
        "allocated_after": torch.cuda.memory_allocated(dev),
        "peak_allocated": torch.cuda.max_memory_allocated(dev),
        "reserved_after": torch.cuda.memory_reserved(dev),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--init", choices=("meta", "cpu"), default="meta")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    t = template()
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    torch.empty(0, device=dev)
    dist.init_process_group("nccl", device_id=dev)
    config["world_size"] = dist.get_world_size()
    dist.barrier()
    if rank == 0:
        torch.cuda.memory._record_memory_history(max_entries=3_000_000, stacks="python")
    label("build")
    torch.manual_seed(0)
    model, make_batch, loss_fn = t.load_model(config, args.init == "meta")
    built = parameter_facts(model)
    model, autocast = t.wrap(model, config, dev, args.init == "meta")
    wrapped = parameter_facts(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"])
    torch.manual_seed(0)
    batch = make_batch(dev)
    phases: list = []
    began = time.perf_counter()
    for step in range(1, args.steps + 1):
        record: dict = {}
        torch.cuda.reset_peak_memory_stats(dev)

        def forward():
            with autocast():
                return loss_fn(model, batch)

        loss = phase(f"s{step}/forward", dev, forward, record)
        phase(f"s{step}/backward", dev, loss.backward, record)
        del loss
        phase(f"s{step}/optimizer", dev, optimizer.step, record)
        phase(f"s{step}/zero_grad", dev, lambda: optimizer.zero_grad(set_to_none=True), record)
        phases.append(record)
    seconds = time.perf_counter() - began
    label("")
    free, total = torch.cuda.mem_get_info(dev)
    mine = {
        "rank": rank,
        "steps": phases,
        "step_peaks": [max(p["peak_allocated"] for p in r.values()) for r in phases],
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(dev),
        "reserved_bytes": torch.cuda.memory_reserved(dev),
        "device_used_bytes": total - free,
        "seconds": seconds,
        "parameters_built": built,
        "parameters_wrapped": wrapped,
    }
    with contextlib.suppress(Exception):
        data = model._get_ddp_logging_data()
        mine["ddp"] = {k: v for k, v in data.items() if "bucket" in k or "gradient" in k}
    if rank == 0:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        mine["peak"] = peak_live(snap["device_traces"][rank], rank)
    ranks: list = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, mine)
    if rank == 0:
        env = {
            "date": datetime.date.today().isoformat(),
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(dev),
            "cuda": str(torch.version.cuda),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        }
        with contextlib.suppress(ImportError):
            import transformers

            env["transformers"] = transformers.__version__
        record = {"config": config, "init": args.init, "ranks": ranks, "environment": env}
        Path(args.out).write_text(json.dumps(record, indent=1))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
