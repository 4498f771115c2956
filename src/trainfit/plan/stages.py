"""A staged schedule planned stage by stage: a frozen backbone for N epochs, then everything
trainable.

`plan_stages(spec, stages, ...)` plans each stage's spec (its own frozen parameters) on the
same devices with `trainfit.plan.search.plan`, so each stage gets its own setting, memory and step
time; a stage that freezes the backbone trains fewer parameters and may fit a larger
micro-batch. The schedule fits a device when every stage does; its peak memory is the
largest stage's; with the run's data size, its hours are the sum of the stages' (each stage
at its own epochs) and so are its costs, option by option. A device where some stage has no
setting names those stages and why (`ScheduleOnDevice.failing_stages`: the stage's verdict
and note; a stage that would fit several of the GPUs sharded is still exported, as sharded).

A measured step time (`measured_step`, `--measured-step`) is taken to be one of the *last*
stage (usually the full model) on the device it names, with the setting planned there: every
stage is planned unmeasured, then every stage's step times are scaled by the same ratio,
measured over the last stage's modelled step on that device, so a frozen stage keeps its
modelled speed-up. Only the last stage's step on that device is labelled measured; the
others are calibrated.

Known limitations: the ladder (the low-memory options) is planned for the last stage
only (usually the one with everything trainable, the largest); a stage switch in one process
keeps the first stage's allocator cache, which is not modelled (each stage is planned as if
it started fresh).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainfit.errors import SpecError, check_argument
from trainfit.hardware.catalog import device_names, get_device
from trainfit.plan.options import DEFAULT_MARGIN, DevicePlan, Plan
from trainfit.plan.search import plan
from trainfit.plan.times import with_run
from trainfit.plan.words import failing_text, plan_dict
from trainfit.progress import Part, tell
from trainfit.spec import Precision, TrainSpec
from trainfit.timing.basis import MeasuredBasis
from trainfit.timing.run import RunSpec
from trainfit.timing.step import StepTime, TimeLabel, scaled


@dataclass(frozen=True, kw_only=True, slots=True)
class StagePlan:
    """One stage of the schedule and its plan."""

    name: str
    epochs: float
    freeze: tuple[str, ...]
    plan: Plan


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleOnDevice:
    """The whole schedule on one device."""

    device: str
    fits: bool
    """Every stage has a setting that fits."""
    peak_needed_bytes: int | None
    """The largest stage's device memory needed (None when a stage does not fit)."""
    hours: float | None
    """The stages' run hours summed (None without a data size, or when a stage has none)."""
    costs: tuple[tuple[str, float], ...]
    """(option, total over the stages), for options priced in every stage."""
    failing_stages: tuple[tuple[str, DevicePlan], ...] = ()
    """(stage name, its plan on this device) for each stage without a setting there (why, in
    words: `trainfit.plan.words.failing_text`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StagedPlan:
    """Every stage's plan, and the schedule per device."""

    stages: tuple[StagePlan, ...]
    devices: tuple[ScheduleOnDevice, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "stages": [
                {
                    "name": s.name,
                    "epochs": s.epochs,
                    "freeze": list(s.freeze),
                    "plan": plan_dict(s.plan),
                }
                for s in self.stages
            ],
            "schedule": [schedule_dict(d) for d in self.devices],
        }


def schedule_dict(d: ScheduleOnDevice) -> dict[str, object]:
    """The schedule on one device as JSON (each failing stage's why in words)."""
    return {
        "device": d.device,
        "fits": d.fits,
        "peak_needed_bytes": d.peak_needed_bytes,
        "hours": d.hours,
        "costs": d.costs,
        "failing_stages": [
            {"stage": name, "why": failing_text(plan)} for name, plan in d.failing_stages
        ],
    }


StageItem = tuple[str, float, "TrainSpec | str | Sequence[str]"]
"""A stage: its name, its epochs, and its own TrainSpec or the globs of what it freezes."""


def plan_stages(
    spec: TrainSpec | None = None,
    stages: Sequence[StageItem] = (),
    effective_batch: int | None = None,
    devices: str | Sequence[str] | None = None,
    margin: float = DEFAULT_MARGIN,
    precision: Precision | None = None,
    jobs: int = 1,
    run: RunSpec | None = None,
    measured_step: tuple[float, str] | None = None,
    *,
    sample: Any = None,
    **fields: Any,
) -> StagedPlan:
    """Plan each (name, epochs, stage) of `stages` (see the module): a stage is its own
    TrainSpec, or the globs of the parameters it freezes in `spec` (one str or a list; none:
    everything trainable), as `--stage EPOCHS[:PATTERN,...]` gives them. Or `spec`'s fields as
    keyword arguments, as `estimate` takes them: a live `nn.Module` with its `sample`
    (`plan_stages(model=net, sample=batch, stages=[("head", 5, "backbone.*"), ("all", 50, [])],
    effective_batch=256, devices="h100")`)."""
    from trainfit.models.live import given_spec

    own = ("stages", "effective_batch", "devices", "margin", "jobs", "run", "measured_step")
    with given_spec(
        "plan_stages", spec, fields, sample, excluded=("batch", "device"), parameters=own
    ) as given:
        items = _stage_specs(given, stages)
        _check_arguments(effective_batch, margin, jobs, run, measured_step)
        assert isinstance(effective_batch, int)
        return _plan_stages(
            items, effective_batch, device_names(devices), margin, precision, jobs, run,  # type: ignore[arg-type]
            measured_step,
        )  # fmt: skip


def _plan_stages(
    stages: list[tuple[str, float, TrainSpec]],
    effective_batch: int,
    devices: tuple[str, ...],
    margin: float,
    precision: Precision | None,
    jobs: int,
    run: RunSpec | None,
    measured_step: tuple[float, str] | None,
) -> StagedPlan:
    if not stages:
        raise SpecError(["a staged plan needs at least one stage (--stage EPOCHS[:PATTERN,...])"])
    planned = []
    for index, (name, epochs, stage_spec) in enumerate(stages):
        tell(Part.STAGE, name, index=index + 1, total=len(stages))
        last = index == len(stages) - 1
        stage_run = None if run is None else dataclasses.replace(run, epochs=epochs)
        # NB: planned unmeasured: a measured step is the last stage's (see the module)
        result = plan(
            stage_spec,
            effective_batch,
            devices,
            margin=margin,
            precision=precision,
            ladder=last,
            jobs=jobs,
            run=stage_run,
        )
        planned.append(StagePlan(name=name, epochs=epochs, freeze=stage_spec.freeze, plan=result))
    if measured_step is not None:
        planned = _measured(planned, *measured_step)
    return StagedPlan(stages=tuple(planned), devices=_schedule(planned))


def _check_arguments(
    effective_batch: object, margin: object, jobs: object, run: object, measured_step: object
) -> None:
    """`plan_stages`' other arguments of the right types, or one line naming the wrong one."""
    name = "plan_stages"
    check_argument(name, "effective_batch", effective_batch, int, "samples per optimizer step")
    check_argument(name, "margin", margin, (int, float), "the fraction kept free, e.g. 0.1")
    check_argument(name, "jobs", jobs, int, "processes to trace in, e.g. 2")
    if run is not None:
        check_argument(name, "run", run, RunSpec, "RunSpec(samples=...) or None")
    well_formed = (
        isinstance(measured_step, tuple)
        and len(measured_step) == 2
        and isinstance(measured_step[0], (int, float))
        and isinstance(measured_step[1], str)
    )
    if measured_step is not None and not well_formed:
        raise SpecError(
            [
                f"{name}: measured_step must be (seconds, device name), e.g. (0.5, 'h100'), "
                f"got {measured_step!r}"
            ]
        )


def _stage_specs(spec: TrainSpec, stages: object) -> list[tuple[str, float, TrainSpec]]:
    """`plan_stages`' stages, each with its TrainSpec (its own, or `spec` freezing its
    globs); one line naming a stage of the wrong shape."""
    check_argument("plan_stages", "stages", stages, (list, tuple), "(name, epochs, stage)s")
    out = []
    for one in stages:  # type: ignore[attr-defined]
        if isinstance(one, tuple) and len(one) == 3:
            name, epochs, stage = one
            globs = (stage,) if isinstance(stage, str) else stage
            numeric = isinstance(epochs, (int, float)) and not isinstance(epochs, bool)
            if isinstance(name, str) and numeric and isinstance(stage, TrainSpec):
                out.append((name, epochs, stage))
                continue
            if (
                isinstance(name, str)
                and numeric
                and isinstance(globs, (list, tuple))
                and all(isinstance(g, str) for g in globs)
            ):
                out.append((name, epochs, dataclasses.replace(spec, freeze=tuple(globs))))
                continue
        got = f"a {type(one).__name__}"
        if isinstance(one, tuple):
            got += f" of ({', '.join(type(v).__name__ for v in one)})"
        raise SpecError(
            [
                "plan_stages: each stage must be (name, epochs, its TrainSpec or the globs it "
                f"freezes), got {got}"
            ]
        )
    return out


def _measured(planned: list[StagePlan], seconds: float, on: str) -> list[StagePlan]:
    """Every stage's step times scaled by `seconds` over the last stage's modelled step on
    `on`; run hours and costs worked out again with the scaled steps."""
    device = get_device(on)
    last = planned[-1]
    reference = next((d for d in last.plan.devices if d.device == device.name), None)
    if reference is None or reference.step_time is None:
        raise SpecError(
            [
                f"--measured-on {on}: the last stage ({last.name}, whose step --measured-step "
                f"is taken to be) has no modelled step time on {device.name}; plan that device "
                "too (--device), with a setting that fits"
            ]
        )
    ref = reference.step_time
    out = []
    for stage in planned:
        is_last = stage is last

        def scale(step: StepTime, is_last: bool = is_last) -> StepTime:
            result = scaled(step, ref, seconds, on)
            if is_last:
                return result
            # NB: another stage (on the measured device too): calibrated by the last stage's step
            return dataclasses.replace(
                result,
                label=TimeLabel.CALIBRATED,
                basis=MeasuredBasis(
                    seconds=seconds, on=on, ratio=step.seconds / ref.seconds, stage=last.name
                ),
            )

        def rescaled(d: DevicePlan, scale=scale) -> DevicePlan:
            if d.step_time is None:
                return d
            return dataclasses.replace(
                d,
                step_time=scale(d.step_time),
                step_times=tuple(
                    (n, dataclasses.replace(scale(t), label=TimeLabel.CALIBRATED))
                    for n, t in d.step_times
                ),
            )

        result = dataclasses.replace(
            stage.plan, devices=tuple(rescaled(d) for d in stage.plan.devices)
        )
        if result.run is not None and result.run.sized:
            result = with_run(result, result.run)
        out.append(dataclasses.replace(stage, plan=result))
    return out


def _schedule(planned: list[StagePlan]) -> tuple[ScheduleOnDevice, ...]:
    out = []
    for i, first in enumerate(planned[0].plan.devices):
        per_stage = [s.plan.devices[i] for s in planned]
        fits = all(d.setting is not None for d in per_stage)
        peak = max(d.setting.needed_bytes for d in per_stage if d.setting) if fits else None
        runs = [d.run for d in per_stage]
        hours = sum(r.hours for r in runs if r) if fits and all(runs) else None
        totals: dict[str, float] = {}
        counts: dict[str, int] = {}
        for d in per_stage:
            for line in d.costs:
                if line.total is not None:
                    totals[line.option] = totals.get(line.option, 0.0) + line.total
                    counts[line.option] = counts.get(line.option, 0) + 1
        costs = tuple(
            (option, total) for option, total in totals.items() if counts[option] == len(per_stage)
        )
        out.append(
            ScheduleOnDevice(
                device=first.device,
                fits=fits,
                peak_needed_bytes=peak,
                hours=hours,
                costs=costs,
                failing_stages=tuple(
                    (s.name, d)
                    for s, d in zip(planned, per_stage, strict=True)
                    if d.setting is None
                ),
            )
        )
    return tuple(out)
