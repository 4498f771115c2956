"""The units a sharding engine gathers: the blocks of the largest `nn.ModuleList` (each
`fully_shard`ed, as `train_fsdp2.py` and benchmarks/sharded do) and the root (the rest:
embeddings, final norm, output head).

Known limitations: a model without a ModuleList is one root unit; every block is taken to be
as large as the largest; a DPO reference model's embeddings and head count in the one root
unit with the policy's (gathered with them, and given unsharded gradients it does not have:
an over-estimate of about its embeddings in the compute dtype, twice).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from trainfit.spec import TrainSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class Units:
    """Parameter elements of the sharded units (ties counted once)."""

    root: int
    """Parameters outside the blocks (the root unit)."""
    largest_block: int
    """The largest block's parameters."""
    blocks: int
    """How many blocks."""
    trainable: int
    """Trainable parameters in all."""
    total: int
    """Parameters in all."""


def blocks_of(model: nn.Module) -> list[nn.Module]:
    """The blocks of the largest ModuleList by parameters, and of every other ModuleList of
    the same length and size (a second copy of the network: DPO's frozen reference model,
    sharded block by block like the policy); empty when there is none."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        return []

    def size(m: nn.Module) -> int:
        return sum(p.numel() for p in m.parameters())

    largest = max(lists, key=size)
    copies = [m for m in lists if len(m) == len(largest) and size(m) == size(largest)]
    return [block for m in copies for block in m]


def units_of(model: nn.Module) -> Units:
    """The units of an (un-sharded) model, on any device, meta included."""
    blocks = blocks_of(model)
    in_blocks: set[int] = set()
    largest = 0
    for block in blocks:
        ids = {id(p) for p in block.parameters()}
        in_blocks |= ids
        largest = max(largest, sum(p.numel() for p in block.parameters()))
    seen: set[int] = set()
    root = trainable = total = 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
        if id(p) not in in_blocks:
            root += p.numel()
    return Units(
        root=root, largest_block=largest, blocks=len(blocks), trainable=trainable, total=total
    )


def units(spec: TrainSpec) -> Units:
    """The units of `spec`'s model, built on the meta device with its settings applied."""
    from trainfit.models.source import build_program
    from trainfit.training import apply_settings

    program = build_program(spec, "meta")
    apply_settings(program, spec)
    return units_of(program.model)
