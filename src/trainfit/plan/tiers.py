"""Splitting the effective batch into micro-batch and accumulation, and the tiers: the
micro-batch that uses at most a share of the device's memory (`TIERS`)."""

from __future__ import annotations

import math
from collections.abc import Callable

from trainfit.estimator.scaling import BatchScaling, max_micro_batch
from trainfit.plan.options import TIERS, Accumulation, RoundedBatch, SettingChange, Tier
from trainfit.spec import TrainSpec


def split(effective: int, largest: int) -> tuple[int, int]:
    """Micro-batch and accumulation for an effective batch, micro-batch at most `largest`.

    The largest divisor of the effective batch that fits keeps it exact; when that divisor is
    under half of what fits (a prime effective batch), the micro-batch that fits is used and
    the effective batch rounds up (micro-batch x accumulation).
    """
    largest = min(largest, effective)
    divisor = max(d for d in range(1, largest + 1) if effective % d == 0)
    if 2 * divisor >= largest:
        return divisor, effective // divisor
    accum = math.ceil(effective / largest)
    return math.ceil(effective / accum), accum


def with_split(
    changes: tuple[SettingChange, ...], micro: int, accum: int, effective: int
) -> tuple[SettingChange, ...]:
    """`changes` plus the batch split, when it is not one step of the effective batch."""
    if accum > 1:
        changes = (*changes, Accumulation(micro_batch=micro, grad_accum=accum))
    if micro * accum != effective:
        changes = (*changes, RoundedBatch(effective=micro * accum, asked=effective))
    return changes


def largest_fit(spec: TrainSpec, margin: float, scaling: BatchScaling) -> int:
    """The largest micro-batch of `spec` inside the margin, with no limit."""
    return max_micro_batch(spec, margin=margin, scaling=scaling).batch


def gpu_tiers(spec: TrainSpec, effective: int, scaling: BatchScaling) -> tuple[Tier, ...]:
    """Each tier's micro-batch on a GPU, from the setting's scaling."""
    tiers = []
    for name, share in TIERS:
        found = max_micro_batch(spec, margin=1.0 - share, limit=effective, scaling=scaling)
        if found.batch < 1:
            tiers.append(Tier(name=name, share=share, micro_batch=0, grad_accum=0, needed_bytes=0))
            continue
        micro, accum = split(effective, found.batch)
        tiers.append(
            Tier(
                name=name,
                share=share,
                micro_batch=micro,
                grad_accum=accum,
                needed_bytes=scaling.needed_bytes(micro),
            )
        )
    return tuple(tiers)


def searched_tiers(
    needed: Callable[[int], int], memory: int, one_needed: int, effective: int, smallest: int
) -> tuple[Tier, ...]:
    """Each tier's micro-batch where every batch's need is an estimate (`needed`), searched
    by `largest_batch` (the CPU)."""
    tiers = []
    for name, share in TIERS:
        fit = (
            largest_batch(needed, int(share * memory), effective, smallest)
            if one_needed <= share * memory
            else 0
        )
        micro, accum = split(effective, fit) if fit else (0, 0)
        tiers.append(
            Tier(
                name=name,
                share=share,
                micro_batch=micro,
                grad_accum=accum,
                needed_bytes=needed(micro) if micro else 0,
            )
        )
    return tuple(tiers)


def largest_batch(needed: Callable[[int], int], budget: int, limit: int, low: int = 1) -> int:
    """The largest batch up to `limit` whose need is within `budget` (batch `low` fits): gallop
    from `low` by doubling, then bisect (the need is taken to grow with the batch)."""
    high = 2 * low
    while high <= limit and needed(high) <= budget:
        low, high = high, 2 * high
    if high > limit:
        if needed(limit) <= budget:
            return limit
        high = limit
    while high - low > 1:
        middle = (low + high) // 2
        if needed(middle) <= budget:
            low = middle
        else:
            high = middle
    return low
