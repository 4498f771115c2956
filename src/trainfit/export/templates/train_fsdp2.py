"""Train with the settings `trainfit plan --export torchrun` wrote (fsdp2_<device>.json): FSDP2
(`torch.distributed.fsdp.fully_shard` on each block and then the root, a 1-D mesh, or a 2-D
(replicate, shard) mesh for fsdp2-hybrid) or DDP, with the plan's precision policy, CPU
offload, activation checkpointing, micro-batch and accumulation.

    torchrun --standalone --nproc-per-node=8 train_fsdp2.py --config fsdp2_h100.json

The model and data: `load_model` builds the config's model with random weights and a
synthetic batch through trainfit when it is installed (what `trainfit plan` traced; a DPO
plan's frozen reference copy too), else
`transformers.AutoModelForCausalLM.from_pretrained(config["hub_id"])` with random token ids;
replace `load_model` and `batches` with your own. trainfit's random-weight model is built with
its parameters on the meta device and materialised after sharding, each rank allocating only
its shard (no full copy in host RAM per rank); with CPU offload, or from_pretrained, it is
built on the CPU. With `--out FILE` rank 0 writes each rank's device memory (before and after
the process group and its first collective, peaks after the steps, in use outside PyTorch's
allocator), step times and, with `--profile`, the collectives' kernel time of one more step
(what benchmarks/sharded checks against the plan). `--device cpu` runs on the CPU with gloo
(a smoke test).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
INIT_STD = 0.02
"""Standard deviation of the random matrices of a model materialised from the meta device."""


@contextlib.contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Modules built inside put their parameters on the meta device and keep their buffers
    (rotary tables) real; a parameter already on meta (a tied weight) is kept as it is."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None and not param.is_meta:
            kind = type(param)
            module._parameters[name] = kind(param.to("meta"), requires_grad=param.requires_grad)

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]


def load_model(config: dict, meta: bool) -> tuple[nn.Module, Callable, Callable]:
    """(model in fp32, its parameters on the meta device when `meta` else on the CPU,
    make_batch(device), loss(model, batch))."""
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
        preference=config.get("preference"),
        reference=config.get("reference") or "model",
        reference_dtype=config.get("reference_dtype"),
        device="cpu",
    )
    with parameters_on_meta() if meta else contextlib.nullcontext():
        program = build_program(spec, "cpu")
    apply_settings(program, spec)  # NB: gradient checkpointing as trainfit traced it
    return program.model, lambda dev: program.make_batch(dev, True), program.compute_loss


def _load_hf(config: dict) -> tuple[nn.Module, Callable, Callable]:
    from transformers import AutoModelForCausalLM

    if config.get("preference"):
        raise SystemExit("preference training needs trainfit installed (its DPO step)")
    model = AutoModelForCausalLM.from_pretrained(config["hub_id"], dtype=torch.float32)
    if config["activation_checkpointing"]:
        # NB: activation_checkpointing_enable since transformers 5.2x (the old name warns)
        enable = getattr(model, "activation_checkpointing_enable", None)
        (enable or model.gradient_checkpointing_enable)({"use_reentrant": False})
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


def _size(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def blocks_of(model: nn.Module) -> list[nn.Module]:
    """The blocks of the largest ModuleList and of every ModuleList of the same length and
    size (a frozen copy of the network: a DPO reference): the units trainfit's model shards."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        return []
    largest = max(lists, key=_size)
    copies = [m for m in lists if len(m) == len(largest) and _size(m) == _size(largest)]
    return [block for m in copies for block in m]


def frozen_copies(model: nn.Module) -> list[nn.Module]:
    """Each child of the root whose parameters are all frozen and hold blocks (a DPO
    reference), taken down to the module its forward runs through (the one with more than
    one child, or parameters of its own): sharded as a unit of its own."""
    blocks = {id(b) for b in blocks_of(model)}
    found = []
    for child in model.children():
        params = list(child.parameters())
        if not params or any(p.requires_grad for p in params):
            continue
        if not any(id(m) in blocks for m in child.modules()):
            continue
        while len(list(child.children())) == 1 and not list(child.parameters(recurse=False)):
            child = next(iter(child.children()))
        found.append(child)
    return found


def materialise(model: nn.Module, device: torch.device) -> None:
    """Allocate the (sharded) parameters of a model built on meta on `device` and fill them
    with random values (matrices N(0, INIT_STD), vectors 1, biases 0); buffers keep their
    values."""
    buffers = [
        (module, name, buffer)
        for module in model.modules()
        for name, buffer in module._buffers.items()
        if buffer is not None
    ]
    model.to_empty(device=device)
    for module, name, buffer in buffers:
        module._buffers[name] = buffer.to(device)
    with torch.no_grad():
        for name, param in model.named_parameters():
            local = param.to_local() if hasattr(param, "to_local") else param
            if name.endswith("bias"):
                local.zero_()
            elif param.dim() < 2:
                local.fill_(1.0)
            else:
                local.normal_(0.0, INIT_STD)


def tied_parameters(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module, str]]:
    """Each (module, name) whose parameter is another's (a tied embedding and output head),
    with the first (module, name) holding it: `nn.Module.to_empty` makes a new parameter at
    each place, untying them (a second copy of the weight, its gradient and its optimizer
    state)."""
    first: dict[int, tuple[nn.Module, str]] = {}
    tied = []
    for module in model.modules():
        for name, param in module._parameters.items():
            if param is None:
                continue
            owner = first.setdefault(id(param), (module, name))
            if owner != (module, name):
                tied.append((module, name, *owner))
    return tied


def retie(tied: list[tuple[nn.Module, str, nn.Module, str]]) -> None:
    """Point each tied place back at its first holder's parameter (see `tied_parameters`)."""
    for module, name, owner, owner_name in tied:
        module._parameters[name] = owner._parameters[owner_name]


def wrap(
    model: nn.Module, config: dict, device: torch.device, meta: bool
) -> tuple[nn.Module, Callable]:
    """The model under the config's engine, and the autocast context of its forward."""
    precision = config["mixed_precision"]
    param_dtype = DTYPES[precision["param_dtype"]]
    if config["strategy"] == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        if meta:
            tied = tied_parameters(model)
            materialise(model, device)
            retie(tied)  # NB: as built (one weight), as trainfit traced it
        else:
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
    for copy in frozen_copies(model):
        fully_shard(copy, **options)
    fully_shard(model, **options)
    if meta:
        materialise(model, device)
        return model, contextlib.nullcontext
    if not config["cpu_offload"]:
        model.to(device)
    for module in model.modules():  # NB: buffers (rotary tables) live on the device
        for name, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[name] = buffer.to(device)
    return model, contextlib.nullcontext


def train_step(
    model: nn.Module, config: dict, data: Iterator, loss_fn: Callable, autocast: Callable
) -> float:
    """One optimizer step's forward and backward passes (accumulated); the loss."""
    accum = config["grad_accum"]
    loss = torch.zeros(())
    for index in range(accum):
        # NB: DDP all-reduces once per optimizer step (no_sync before); FSDP2 reduce-scatters
        # every micro-batch, as the plan's memory and time assume
        last = index == accum - 1
        sync = hasattr(model, "no_sync") and not last
        with model.no_sync() if sync else contextlib.nullcontext():
            with autocast():
                loss = loss_fn(model, next(data)) / accum
            loss.backward()
    if config.get("grad_clip"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
    return float(loss.detach()) * accum


def used_bytes(device: torch.device) -> int:
    """Device memory in use on `device` (total - free), every process's."""
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def kernel_seconds(profile) -> dict:
    """The profiled step's GPU kernel time on this rank: NCCL's collectives and the rest."""
    comm = compute = 0.0
    for event in profile.key_averages():
        micros = getattr(event, "self_device_time_total", None)
        if micros is None:
            micros = getattr(event, "self_cuda_time_total", 0.0)
        if not micros or str(getattr(event, "device_type", "")).split(".")[-1] != "CUDA":
            continue
        if "nccl" in event.key.lower():
            comm += micros / 1e6
        else:
            compute += micros / 1e6
    return {"nccl_kernel_seconds": comm, "other_kernel_seconds": compute}


def profiled_step(step: Callable[[], float], device: torch.device) -> dict:
    """One more optimizer step under torch.profiler: its wall time and kernel times."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    dist.barrier()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        step()
        torch.cuda.synchronize(device)
        wall = time.perf_counter() - start
    return {"profiled_step_seconds": wall, **kernel_seconds(prof)}


def nvidia_smi() -> list[str]:
    """Each GPU's memory in use as nvidia-smi reports it (empty without nvidia-smi)."""
    query = "index,name,memory.used,memory.total,driver_version"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.strip().splitlines()


def start(device_name: str) -> tuple[torch.device, dict]:
    """Join the process group (NCCL on this rank's GPU, else gloo); on a GPU, the device
    memory in use after the CUDA context, after the group's eager init and after its first
    collective (a barrier)."""
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_name == "cpu":
        dist.init_process_group("gloo")
        return torch.device("cpu"), {}
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    torch.empty(0, device=device)
    probes = {"context_used_bytes": used_bytes(device)}
    dist.init_process_group("nccl", device_id=device)
    probes["after_init_used_bytes"] = used_bytes(device)
    dist.barrier()
    torch.cuda.synchronize(device)
    probes["after_first_collective_used_bytes"] = used_bytes(device)
    return device, probes


def memory_after(device: torch.device) -> dict:
    """This rank's peaks and device memory after the steps."""
    used = used_bytes(device)
    return {
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
        "device_used_bytes": used,
        "outside_allocator_bytes": used - torch.cuda.memory_reserved(device),
    }


def run(args: argparse.Namespace, config: dict, device: torch.device, mine: dict) -> None:
    """Build, wrap and train `args.steps` optimizer steps, filling `mine` with what was
    measured (losses, step times, memory, and the profiled step's kernel times)."""
    torch.manual_seed(0)
    meta = not config["cpu_offload"] and args.init == "meta"
    model, make_batch, loss_fn = load_model(config, meta)
    model, autocast = wrap(model, config, device, meta)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"])
    torch.manual_seed(0)  # NB: the same batch on every rank, whatever the init drew
    data = batches(make_batch, device)
    cuda = device.type == "cuda"

    def step() -> float:
        loss = train_step(model, config, data, loss_fn, autocast)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(args.steps):
        began = time.perf_counter()
        mine["losses"].append(step())
        if cuda:
            torch.cuda.synchronize(device)
        mine["step_seconds"].append(time.perf_counter() - began)
    if cuda:
        mine.update(memory_after(device))
        if args.profile:
            try:
                mine.update(profiled_step(step, device))
            except Exception as exc:  # NB: the steps' figures stand without the profile
                mine["profile_error"] = f"{type(exc).__name__}: {exc}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="fsdp2_<device>.json from trainfit")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--out", default=None, help="write per-rank memory and times (JSON)")
    parser.add_argument(
        "--init",
        default="meta",
        choices=("meta", "cpu"),
        help="build trainfit's random-weight model on meta and materialise the shards "
        "(default), or whole on the CPU",
    )
    parser.add_argument(
        "--profile", action="store_true", help="with --out: profile one more step's kernels"
    )
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    device, probes = start(args.device)
    if dist.get_world_size() != config["world_size"]:
        raise SystemExit(
            f"the config is for {config['world_size']} processes, torchrun started "
            f"{dist.get_world_size()}"
        )
    mine: dict = {"rank": dist.get_rank(), "losses": [], "step_seconds": [], **probes}
    try:
        run(args, config, device, mine)
    except torch.OutOfMemoryError as exc:
        mine["error"] = f"out of memory: {str(exc).splitlines()[0]}"
        if device.type == "cuda":
            mine.update(memory_after(device))
    mine.setdefault("error", "")
    ranks: list = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, mine)
    if dist.get_rank() == 0 and args.out:
        write(Path(args.out), config, args, ranks, device)
    dist.barrier()  # NB: no rank leaves while another still talks (gloo aborts otherwise)
    dist.destroy_process_group()


def write(out: Path, config: dict, args: argparse.Namespace, ranks: list, device) -> None:
    """Rank 0's record of the run: the config, each rank's figures and the versions."""
    env = {"date": datetime.date.today().isoformat(), "torch": torch.__version__}
    if device.type == "cuda":
        env.update(
            device=torch.cuda.get_device_name(device),
            cuda=str(torch.version.cuda),
            nccl=".".join(map(str, torch.cuda.nccl.version())),
            nvidia_smi=nvidia_smi(),
        )
    record = {"config": config, "steps": args.steps, "ranks": ranks, "environment": env}
    out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
