"""How long a plan is expected to run, counted before it starts: a plan over many models and
devices says so and waits for a yes (`trainfit plan ... --yes`).

NB: a count, not a model of the tracer: each device of each model's plan (of each stage's,
with stages) is counted at `SECONDS_PER_DEVICE`. What a device costs depends on the model's
size, the settings that must be traced and the machine's load: on the 2-core machine of
`benchmarks/speed` a 7B Llama shape took about 1.5 s a device over ten devices sharing traces,
and two devices of gpt2 or an 8B Llama 12 to 28 s each on the machine busy; 5 s is between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainfit.errors import SpecError
from trainfit.hardware.catalog import DEFAULT_DEVICES
from trainfit.specfile.options import PlanOptions

SECONDS_PER_DEVICE = 5.0
"""Seconds counted for one device of one model's (or stage's) plan."""
LONG_SECONDS = 180.0
"""A plan counted longer than this waits for a yes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload:
    """What a plan will do: its models and the device plans among them."""

    models: int
    """Models planned."""
    device_plans: int
    """Devices planned, summed over the models (and their stages)."""

    @property
    def seconds(self) -> float:
        """The plan's expected duration (see the module)."""
        return self.device_plans * SECONDS_PER_DEVICE


def workload(models: Sequence[PlanOptions]) -> Workload:
    """The workload of planning each of `models`."""
    plans = sum(len(o.device or DEFAULT_DEVICES) * max(1, len(o.stage)) for o in models)
    return Workload(models=len(models), device_plans=plans)


def _duration(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 60:.0f} minutes"


def check_confirmed(work: Workload, confirmed: bool) -> None:
    """SpecError when `work` is counted longer than `LONG_SECONDS` and not `confirmed`."""
    if work.seconds <= LONG_SECONDS or confirmed:
        return
    models = f"{work.models} models" if work.models != 1 else "1 model"
    raise SpecError(
        [
            f"this plan covers {models} and {work.device_plans} device plans, about "
            f"{_duration(work.seconds)} at ~{SECONDS_PER_DEVICE:.0f} s each on a 2-core machine: "
            "pass --yes to start it, or plan fewer models or devices"
        ]
    )
