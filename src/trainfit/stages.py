"""A staged schedule planned stage by stage: seed 002's frozen backbone for N epochs, then
everything trainable.

`plan_stages(spec, stages, ...)` plans each stage's spec (its own frozen parameters) on the
same devices with `trainfit.plan.plan`, so each stage gets its own setting, memory and step
time; a stage that freezes the backbone trains fewer parameters and may fit a larger
micro-batch. The schedule fits a device when every stage does; its peak memory is the
largest stage's; with the run's data size, its hours are the sum of the stages' (each stage
at its own epochs) and so are its costs, option by option.

Known limitations: the ladder (seed 004's low-memory options) is planned for the last stage
only (usually the one with everything trainable, the largest); a stage switch in one process
keeps the first stage's allocator cache, which is not modelled (each stage is planned as if
it started fresh).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from trainfit.errors import SpecError
from trainfit.plan import DEFAULT_MARGIN, Plan, plan
from trainfit.spec import Precision, TrainSpec
from trainfit.timing.run import RunSpec


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
                    "plan": s.plan.to_dict(),
                }
                for s in self.stages
            ],
            "schedule": [dataclasses.asdict(d) for d in self.devices],
        }


def plan_stages(
    spec: TrainSpec,
    stages: list[tuple[str, float, TrainSpec]],
    effective_batch: int,
    devices: tuple[str, ...],
    margin: float = DEFAULT_MARGIN,
    precision: Precision | None = None,
    jobs: int = 1,
    run: RunSpec | None = None,
    measured_step: tuple[float, str] | None = None,
) -> StagedPlan:
    """Plan each (name, epochs, stage spec) of `stages` (see the module)."""
    if not stages:
        raise SpecError(["a staged plan needs at least one stage (--stage EPOCHS[:PATTERN,...])"])
    planned = []
    for index, (name, epochs, stage_spec) in enumerate(stages):
        last = index == len(stages) - 1
        stage_run = None if run is None else dataclasses.replace(run, epochs=epochs)
        result = plan(
            stage_spec,
            effective_batch,
            devices,
            margin=margin,
            precision=precision,
            ladder=last,
            jobs=jobs,
            run=stage_run,
            measured_step=measured_step,
        )
        planned.append(StagePlan(name=name, epochs=epochs, freeze=stage_spec.freeze, plan=result))
    return StagedPlan(stages=tuple(planned), devices=_schedule(planned))


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
                device=first.device, fits=fits, peak_needed_bytes=peak, hours=hours, costs=costs
            )
        )
    return tuple(out)
