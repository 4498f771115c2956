"""The units a sharding engine gathers: the blocks of the largest `nn.ModuleList` (each
`fully_shard`ed, as `train_fsdp2.py` and benchmarks/sharded do) and the root (the rest:
embeddings, final norm, output head).

A DPO reference model (a frozen copy registered under the policy) is sharded like the
policy: its blocks block by block, and the rest of the copy (its embeddings, final norm and
head) as a unit of its own, which `train_fsdp2.py` gathers for the reference's forward and
frees after it (`reshard_after_forward`; no gradients): it is not the root, and not held at
the step's peak in backward (`Units.reference_root`).

Known limitations: a model without a ModuleList is one root unit; every block is taken to be
as large as the largest.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from trainfit.spec import TrainSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class Units:
    """Parameter elements of the sharded units (ties counted once)."""

    root: int
    """Parameters outside the blocks (the root unit), a frozen reference copy's excluded."""
    reference_root: int
    """A DPO reference copy's parameters outside its blocks (its own unit; 0 without one)."""
    reference: int
    """A DPO reference copy's parameters in all (0 without one)."""
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
    from trainfit.models.preference import reference_parameter_ids

    blocks = blocks_of(model)
    reference = reference_parameter_ids(model)
    in_blocks: set[int] = set()
    largest = 0
    for block in blocks:
        ids = {id(p) for p in block.parameters()}
        in_blocks |= ids
        largest = max(largest, sum(p.numel() for p in block.parameters()))
    seen: set[int] = set()
    root = reference_root = reference_total = trainable = total = 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
        if id(p) in reference:
            reference_total += p.numel()
        if id(p) in in_blocks:
            continue
        if id(p) in reference:
            reference_root += p.numel()
        else:
            root += p.numel()
    return Units(
        root=root,
        reference_root=reference_root,
        reference=reference_total,
        largest_block=largest,
        blocks=len(blocks),
        trainable=trainable,
        total=total,
    )


def units(spec: TrainSpec) -> Units:
    """The units of `spec`'s model, built on the meta device with its settings applied (kept
    on disk with the traces: `trainfit.trace.store.remembered`)."""
    from trainfit.models.source import build_program
    from trainfit.trace.store import remembered
    from trainfit.training import apply_settings

    def found() -> Units:
        program = build_program(spec, "meta")
        apply_settings(program, spec)
        return units_of(program.model)

    return remembered("units", spec, found)
