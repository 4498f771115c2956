"""Communication time of one optimizer step on N GPUs, and how much of it shows.

Volumes per GPU (ring collectives; Patarasuk & Yuan 2009, NCCL's bus-bandwidth convention):

- ddp, zero1, zero2: one all-reduce of the gradients per optimizer step (DDP skips it on
  accumulation micro-batches under `no_sync`; ZeRO-1/2 run it as reduce-scatter + all-gather,
  the same volume): 2(N-1)/N x gradient bytes.
- fsdp2, zero3: per micro-batch, the parameters are all-gathered in forward and again in
  backward and the gradients reduce-scattered: (N-1)/N x (2 x parameter bytes in the compute
  dtype + gradient bytes in the reduce dtype), about 3 x parameter bytes x (N-1)/N. A DPO
  reference copy is gathered once (its forward runs under no_grad; the caller counts it as
  half its parameters in `parameter_elements`).
- fsdp2-hybrid: that within each node over its G GPUs, plus an all-reduce of each GPU's
  gradient shard across the M nodes: 2(M-1)/M x gradient bytes / G over the inter-node link.

Links (`timing.run.interconnect_gbs`): NVLink (half its both-ways figure) or PCIe within a
node, InfiniBand between nodes (`timing.run.INTER_NODE_GBS`, an assumed 400 Gb/s per GPU), at
NCCL's measured bus-bandwidth efficiency (`timing.run.NCCL_EFFICIENCY`).

Overlap (an assumption, labelled): DDP's all-reduce is taken as not hidden (on 2 x H200 it
added at least the ring time in four of five steps: `timing.run.ddp_seconds`, which is used
here, bucket copies included); the sharded engines prefetch the next unit's all-gather and
reduce-scatter the previous unit's gradients while a unit computes, so up to OVERLAP of the
forward and backward compute time hides their traffic.

Measured on 4 x H100 (benchmarks/sharded/results/scale_h100.md): inside FSDP2 steps the
NCCL kernels took about the predicted time, and the exposed share was small (at most 0.05 s
for a full fine-tune); alone, large collectives run faster than NCCL_EFFICIENCY says (300 to
345 GB/s of bus bandwidth against 227).

Known limitations: no latency term (small models over many GPUs are under-estimated); one
flat ring over all GPUs (NCCL's trees and NVLink SHARP are not modelled); 8 GPUs and several
nodes not measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from trainfit.distributed.strategy import Layout, Strategy
from trainfit.hardware.catalog import Device
from trainfit.timing.run import INTER_NODE_GBS, NCCL_EFFICIENCY, ddp_seconds, interconnect_gbs

OVERLAP = 0.8
"""Share of forward + backward compute that hides a sharded engine's collectives (assumed,
not measured)."""


class Collectives(StrEnum):
    """A step's collectives and the overlap assumed for them (words: `trainfit.plan.words`)."""

    NONE = "none"
    """One GPU: no collectives."""
    ALL_REDUCE = "all-reduce"
    """A gradient all-reduce once per optimizer step, none of it hidden (measured for DDP)."""
    GATHERED = "gathered"
    """All-gathers and reduce-scatters every micro-batch, up to OVERLAP of the forward and
    backward compute hiding them (assumed)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CommTime:
    """Collectives of one optimizer step on one rank."""

    seconds: float
    """All the step's collectives, end to end."""
    exposed_seconds: float
    """What is not hidden under compute (added to the step)."""
    bytes_per_gpu: int
    """Bytes each GPU sends in the step."""
    intra_gbs: float
    """Link bandwidth within a node (GB/s, one direction)."""
    inter_gbs: float | None
    """Between nodes (None on one node)."""
    collectives: Collectives
    """What the collectives are and how much of them is taken as hidden."""


def comm_time(
    strategy: Strategy,
    layout: Layout,
    device: Device,
    parameter_elements: int,
    gradient_bytes: int,
    compute_bytes: int,
    grad_accum: int,
    compute_seconds: float,
) -> CommTime:
    """The collectives of one optimizer step: `parameter_elements` gathered (sharded
    engines) at `compute_bytes` each, `gradient_bytes` reduced (in the reduce dtype), over
    `grad_accum` micro-batches whose forward and backward take `compute_seconds` in all."""
    n, g, m = layout.gpus, layout.per_node, layout.nodes
    intra = interconnect_gbs(device, min(n, g), per_machine=g)
    inter = INTER_NODE_GBS if m > 1 else None
    if n == 1:
        return CommTime(
            seconds=0.0,
            exposed_seconds=0.0,
            bytes_per_gpu=0,
            intra_gbs=intra,
            inter_gbs=None,
            collectives=Collectives.NONE,
        )
    if strategy in (Strategy.DDP, Strategy.ZERO1, Strategy.ZERO2):
        volume = int(2 * (n - 1) / n * gradient_bytes)
        seconds = ddp_seconds(device, n, gradient_bytes)
        return CommTime(
            seconds=seconds,
            exposed_seconds=seconds,
            bytes_per_gpu=volume,
            intra_gbs=intra,
            inter_gbs=inter,
            collectives=Collectives.ALL_REDUCE,
        )
    gathered = 2 * parameter_elements * compute_bytes + gradient_bytes
    if strategy is Strategy.FSDP2_HYBRID and m > 1:
        inside = int((g - 1) / g * gathered) * grad_accum
        across = int(2 * (m - 1) / m * gradient_bytes / g)
        seconds = inside / (intra * 1e9 * NCCL_EFFICIENCY) + across / (
            INTER_NODE_GBS * 1e9 * NCCL_EFFICIENCY
        )
        volume = inside + across
    else:
        link = interconnect_gbs(device, n, per_machine=g)
        volume = int((n - 1) / n * gathered) * grad_accum
        seconds = volume / (link * 1e9 * NCCL_EFFICIENCY)
    exposed = max(0.0, seconds - OVERLAP * compute_seconds)
    return CommTime(
        seconds=seconds,
        exposed_seconds=exposed,
        bytes_per_gpu=volume,
        intra_gbs=intra,
        inter_gbs=inter,
        collectives=Collectives.GATHERED,
    )
