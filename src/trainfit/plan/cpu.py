"""The CPU as a device: fp32 (then checkpointing) in this host's RAM, or the RAM of a user
catalog's cpu row; every micro-batch tried is a full CPU estimate (peak resident memory,
`trainfit.estimator.cpu`), searched up to the effective batch."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from trainfit.errors import SpecError, TraceError
from trainfit.hardware.catalog import Device
from trainfit.plan.options import (
    Change,
    CpuFp32,
    CpuShort,
    CpuSized,
    DevicePlan,
    RamUnknown,
    Setting,
    SettingChange,
    Verdict,
    no_setting,
)
from trainfit.plan.tiers import largest_batch, searched_tiers, split, with_split
from trainfit.spec import Precision, TrainSpec


def plan_cpu(spec: TrainSpec, effective: int, device: Device, margin: float) -> DevicePlan:
    """The CPU's plan: the first rung (fp32, then with checkpointing) on which one sample fits
    the RAM inside the margin, with the largest micro-batch up to the effective batch."""
    from trainfit.hardware.host import total_ram_bytes

    ram = device.memory_bytes or total_ram_bytes()
    if not ram:
        return no_setting(device, Verdict.NOT_ESTIMATED, RamUnknown())
    budget = int((1.0 - margin) * ram)
    base = dataclasses.replace(spec, precision=Precision.FP32, device=device.name)
    rungs: list[tuple[TrainSpec, tuple[SettingChange, ...]]] = [(base, ())]
    if not base.checkpointing:
        rungs.append((dataclasses.replace(base, checkpointing=True), (Change.CHECKPOINTING,)))
    from_catalog = bool(device.memory_bytes)
    one_needed = 0
    for rung_spec, changes in rungs:
        needed = _estimates(rung_spec, device)
        smallest = 1
        try:
            try:
                one_needed = needed(1)
            except TraceError:
                # NB: a model that cannot train on one sample (BatchNorm) starts at two
                smallest = 2
                one_needed = needed(2)
        except SpecError:
            if not rung_spec.checkpointing or spec.checkpointing:
                raise
            continue
        if one_needed > budget or smallest > effective:
            continue
        found = largest_batch(needed, budget, effective, smallest)
        micro, accum = split(effective, found)
        changes = with_split(changes, micro, accum, effective)
        if spec.precision is not Precision.FP32:
            changes = (CpuFp32(), *changes)
        return DevicePlan(
            device=device.name,
            display=device.display,
            verdict=Verdict.COMFORTABLE if not changes else Verdict.WITH_CHANGES,
            setting=Setting(
                precision=rung_spec.precision,
                checkpointing=rung_spec.checkpointing,
                optimizer=rung_spec.optimizer,
                micro_batch=micro,
                grad_accum=accum,
                needed_bytes=needed(micro),
            ),
            changes=changes,
            max_micro_batch=found,
            tiers=searched_tiers(needed, ram, one_needed, effective, smallest),
            note=CpuSized(ram_bytes=ram, from_catalog=from_catalog),
        )
    short = CpuShort(
        one_sample_bytes=one_needed, usable_bytes=budget, ram_bytes=ram, from_catalog=from_catalog
    )
    return no_setting(device, Verdict.NO, short)


def _estimates(spec: TrainSpec, device: Device) -> Callable[[int], int]:
    """The CPU memory `spec` needs at a batch (a full estimate, once per batch)."""
    from trainfit.estimator.cpu import estimate_cpu

    known: dict[int, int] = {}

    def needed(batch: int) -> int:
        if batch not in known:
            at = dataclasses.replace(spec, batch=batch)
            known[batch] = estimate_cpu(at, device, 0.0).device_memory_needed_bytes
        return known[batch]

    return needed
