"""A plan's step times and run costs: the chosen setting's modelled step on one GPU and on
each data-parallel GPU count, a measured step scaling them all, and the whole run's hours and
costs per device (`trainfit.timing`).

NB: the run's arithmetic (hours, costs, recommendations) is `trainfit.timing.run`'s; this
module only maps a plan's devices onto it.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

from trainfit.errors import SpecError
from trainfit.estimator.scaling import BatchScaling
from trainfit.hardware.catalog import Device, DeviceKind, get_device
from trainfit.plan.options import Plan
from trainfit.plan.tiers import split
from trainfit.spec import TrainSpec
from trainfit.timing.checks import without_blind_check
from trainfit.timing.missing import NoStepTime, NoTime, RateMissing, not_modelled
from trainfit.timing.run import CostLine, RunSpec, Stage, recommend, run_estimate, run_time
from trainfit.timing.step import StepTime, TimeLabel, scaled, step_time


class StepTimes(TypedDict, total=False):
    """A device plan's step-time fields (`DevicePlan.step_time`, `step_times`, `no_time`)."""

    step_time: StepTime
    step_times: tuple[tuple[int, StepTime], ...]
    no_time: NoStepTime


GPU_COUNTS = (2, 4, 8, 16)
"""Data-parallel GPU counts a plan times (those the effective batch splits over), with the
run's own count."""


def step_times(
    spec: TrainSpec,
    device: Device,
    scaling: BatchScaling,
    micro: int,
    accum: int,
    effective: int,
    gpu_counts: tuple[int, ...],
) -> StepTimes:
    """DevicePlan's step_time, step_times and no_time for the chosen setting; each GPU
    count's step takes its share of the effective batch split as one GPU's is (the chosen
    micro-batch or less)."""
    try:
        one = _step_time(spec, device, scaling, micro, accum)
    except (RateMissing, SpecError) as exc:
        return {"no_time": not_modelled(exc)}
    if one is None:
        return {"no_time": NoStepTime(why=NoTime.PROBES_DIFFER)}
    if device.kind is not DeviceKind.CUDA:
        return {"step_time": one}
    shares = []
    for n in gpu_counts:
        if effective % n:
            continue
        micro_n, accum_n = split(effective // n, micro)
        step = _step_time(spec, device, scaling, micro_n, accum_n)
        if step is not None:
            shares.append((n, over_gpus(step, n)))
    return {"step_time": one, "step_times": tuple(shares)}


def over_gpus(step: StepTime, gpus: int) -> StepTime:
    """One GPU's step over its share of a data-parallel step, with the throughput of all
    `gpus` together: each GPU takes its share in the same time, so `gpus` times the samples
    (and tokens) a second of one GPU."""
    return dataclasses.replace(
        step,
        samples_per_second=step.samples_per_second * gpus,
        tokens_per_second=(
            None if step.tokens_per_second is None else step.tokens_per_second * gpus
        ),
        notes=without_blind_check(step.notes),  # NB: the blind sets ran on one GPU
    )


def _step_time(
    spec: TrainSpec, device: Device, scaling: BatchScaling, micro: int, accum: int
) -> StepTime | None:
    """The modelled step time of a setting (None when the probes ran different ops; raises
    RateMissing where the catalog lacks a rate)."""
    costs = scaling.costs_at(micro)
    if costs is None:
        return None
    return step_time(
        costs,
        dataclasses.replace(spec, batch=micro, grad_accum=accum),
        device,
        scaling.base.tokens_per_sample,
        scaling.base.trainable_tensors,
    )


def with_measured_step(result: Plan, seconds: float, on: str) -> Plan:
    """`result` with every device's step time scaled by a step measured on device `on` with
    the setting the plan chose there ("measured" there, "calibrated" elsewhere)."""
    device = get_device(on)
    reference = next((d for d in result.devices if d.device == device.name), None)
    if reference is None or reference.step_time is None:
        raise SpecError(
            [
                f"--measured-on {on}: the plan has no modelled step time on {device.name}; "
                "plan that device too (--device), with a setting that fits"
            ]
        )

    def scale(step: StepTime) -> StepTime:
        return scaled(step, reference.step_time, seconds, on)

    devices = tuple(
        dataclasses.replace(
            d,
            step_time=scale(d.step_time),
            # NB: other micro-batches than the one measured: calibrated, not measured
            step_times=tuple(
                (n, dataclasses.replace(scale(t), label=TimeLabel.CALIBRATED))
                for n, t in d.step_times
            ),
        )
        if d.step_time is not None
        else d
        for d in result.devices
    )
    return dataclasses.replace(result, devices=devices)


def with_run(result: Plan, run: RunSpec) -> Plan:
    """`result` with each fitting device's run hours (on `run.gpus` of it) and costs, and the
    recommendations over every device."""
    devices = []
    lines: list[CostLine] = []
    for d in result.devices:
        if d.step_time is None or d.setting is None:
            devices.append(d)
            continue
        device = get_device(d.device)
        grad_bytes = result.trainable_parameters * d.setting.precision.param_dtype.itemsize
        per_gpu = {1: d.step_time, **dict(d.step_times)}

        def hours(
            n: int, step: StepTime, device: Device = device, grad_bytes: int = grad_bytes
        ) -> float:
            stage = Stage(name="train", epochs=run.epochs, step=step)
            # NB: the batch a step really takes (a prime effective batch rounds up)
            return run_time(
                [stage],
                step.micro_batch * step.grad_accum * n,
                dataclasses.replace(run, gpus=n),
                device,
                grad_bytes,
                result.tokens_per_sample,
            ).hours

        if run.gpus not in per_gpu:
            why = (
                NoStepTime(why=NoTime.MULTI_GPU_NOT_CUDA)
                if device.kind is not DeviceKind.CUDA
                else NoStepTime(why=NoTime.NO_GPU_COUNT, gpus=run.gpus)
            )
            devices.append(dataclasses.replace(d, no_time=why))
            continue
        step = per_gpu[run.gpus]
        estimate = run_estimate(
            [Stage(name="train", epochs=run.epochs, step=step)],
            step.micro_batch * step.grad_accum * run.gpus,
            run,
            device,
            grad_bytes,
            result.tokens_per_sample,
            hours_for={n: hours(n, step) for n, step in per_gpu.items()},
        )
        lines += estimate.costs
        devices.append(dataclasses.replace(d, run=estimate.time, costs=estimate.costs))
    return dataclasses.replace(
        result,
        devices=tuple(devices),
        run=run,
        recommendation=recommend(lines, run.deadline_hours) if lines else None,
    )
