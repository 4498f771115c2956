"""One device's plan: the first rung of its settings ladder on which a sample fits inside the
margin, the largest micro-batch there up to the effective batch, its tiers and step times;
or why none fits (`GpuShort`), for the multi-GPU plan to take up (`trainfit.plan.beyond`).
"""

from __future__ import annotations

import dataclasses

from trainfit.errors import SpecError
from trainfit.estimator.scaling import BatchScaling, max_micro_batch
from trainfit.hardware.catalog import Device, DeviceKind
from trainfit.models.source import build_program
from trainfit.plan.cpu import plan_cpu
from trainfit.plan.ladder import setting_name, setting_rungs
from trainfit.plan.options import (
    DevicePlan,
    GpuShort,
    MemoryUnknown,
    Setting,
    SettingChange,
    Verdict,
    no_setting,
)
from trainfit.plan.tiers import gpu_tiers, largest_fit, split, with_split
from trainfit.plan.times import step_times
from trainfit.plan.traces import (
    TraceCache,
    floor_bytes,
    one_sample_over,
    scaling_for,
)
from trainfit.progress import Part, tell
from trainfit.spec import TrainSpec
from trainfit.timing.missing import NoStepTime, NoTime
from trainfit.trace.store import remembered
from trainfit.training import enable_checkpointing


def plan_device(
    spec: TrainSpec,
    effective: int,
    device: Device,
    margin: float,
    auto_precision: bool,
    cache: TraceCache,
    gpu_counts: tuple[int, ...] = (),
) -> DevicePlan:
    """The plan of `spec` on `device` (the CPU: `plan_cpu`)."""
    if device.kind is DeviceKind.CPU:
        return dataclasses.replace(
            plan_cpu(spec, effective, device, margin),
            no_time=NoStepTime(why=NoTime.CPU),
        )
    if not device.memory_bytes:
        return no_setting(device, Verdict.NOT_ESTIMATED, MemoryUnknown())
    skipped: list[str] = []
    budget = (1.0 - margin) * device.memory_bytes
    floor = 0
    latest_one: int | None = None
    untried = None
    rungs = setting_rungs(spec, device, auto_precision)
    for index, (rung_spec, changes) in enumerate(rungs, start=1):
        tell(Part.RUNG, setting_name(rung_spec), index=index, total=len(rungs))
        floor = floor_bytes(rung_spec, device, cache)
        if floor > budget:
            untried = rung_spec
            continue  # weights, gradients and optimizer state alone do not fit
        untried = None
        try:
            over = one_sample_over(rung_spec, device, cache, int(budget))
            if over is not None:
                latest_one = over
                continue
            scaling = scaling_for(rung_spec, device, cache)
        except SpecError as exc:
            if not rung_spec.checkpointing or spec.checkpointing:
                raise
            skipped.append(str(exc))
            continue
        found = max_micro_batch(rung_spec, margin=margin, limit=effective, scaling=scaling)
        if found.batch < 1:
            latest_one = found.needed_bytes
            continue
        fit = _Fit(spec=rung_spec, changes=changes, scaling=scaling, largest=found.batch)
        return _fitting(fit, device, effective, margin, gpu_counts)
    if untried is not None and device.kind is DeviceKind.CUDA and not skipped:
        skipped = _cannot_checkpoint(untried, spec)
    short = GpuShort(
        one_sample_bytes=latest_one,
        states_bytes=floor,
        usable_bytes=budget,
        optimizer=spec.optimizer,
        cuda=device.kind is DeviceKind.CUDA,
        no_checkpointing=tuple(skipped),
    )
    return no_setting(device, Verdict.NO, short)


def _cannot_checkpoint(last: TrainSpec, spec: TrainSpec) -> list[str]:
    """Why the ladder's last setting cannot checkpoint, when no rung was traced to find out
    (its model states alone exceed the GPU) and the plan turned checkpointing on; else []."""
    if not last.checkpointing or spec.checkpointing:
        return []

    def problems() -> list[str]:
        try:
            # NB: the meta copy the tracer would build, with its checkpointing turned on
            enable_checkpointing(build_program(last, "meta"), last.checkpoint_modules)
        except SpecError as exc:
            return [str(exc)]
        return []

    return remembered("checkpointing", last, problems)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class _Fit:
    """The first rung that fits: its setting, changes, scaling and largest batch."""

    spec: TrainSpec
    changes: tuple[SettingChange, ...]
    scaling: BatchScaling
    largest: int
    """The largest micro-batch inside the margin, up to the effective batch."""


def _fitting(
    fit: _Fit, device: Device, effective: int, margin: float, gpu_counts: tuple[int, ...]
) -> DevicePlan:
    """The plan of a device on the rung that fits: the batch split, tiers and step times."""
    micro, accum = split(effective, fit.largest)
    changes = with_split(fit.changes, micro, accum, effective)
    setting = Setting(
        precision=fit.spec.precision,
        checkpointing=fit.spec.checkpointing,
        optimizer=fit.spec.optimizer,
        micro_batch=micro,
        grad_accum=accum,
        needed_bytes=fit.scaling.needed_bytes(micro),
    )
    times = step_times(fit.spec, device, fit.scaling, micro, accum, effective, gpu_counts)
    return DevicePlan(
        device=device.name,
        display=device.display,
        verdict=Verdict.COMFORTABLE if not changes else Verdict.WITH_CHANGES,
        setting=setting,
        changes=changes,
        max_micro_batch=largest_fit(fit.spec, margin, fit.scaling),
        tiers=gpu_tiers(fit.spec, effective, fit.scaling),
        **times,
    )
