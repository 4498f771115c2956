"""What a real run is about to cost, said before it starts: the modelled step time, the run's
total, and the warnings a user should see first (a run over a minute; bf16 or fp16 that this
CPU emulates).

Known limitations: the total is the modelled step times the steps asked for (warm-up and the
loop window included); building the model and the first step's optimizer-state allocation are
not counted, and every step is counted at the loop's steady period the estimate models (on the
CPU a step timed alone takes as long; on a GPU a host-bound step synchronised after it takes
longer). The CPU model predicts an idle CPU: on a machine whose load average exceeds its
cores, other processes slow every step (on a 2-core host at load 7-14, two-thread steps took
10-200x their prediction, benchmarks/accuracy_cpu/README.md), which the forecast warns about.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainfit.estimator.result import Estimate
from trainfit.hardware.catalog import DeviceKind
from trainfit.hardware.cpu_features import CpuFeatures, HalfSupport, cpu_features
from trainfit.measure.window import FILLING_STEPS
from trainfit.spec import Precision
from trainfit.timing.basis import SlowHalfPrecision
from trainfit.timing.cpu import slow_half_precision_of
from trainfit.timing.missing import NoStepTime, NoTime
from trainfit.timing.step import StepTime

LONG_RUN_SECONDS = 60.0
"""A run predicted to take longer than this is warned about before it starts."""

_HALF = {Precision.BF16: "bf16", Precision.PURE_BF16: "bf16", Precision.FP16: "fp16"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Forecast:
    """What a run of `steps` steps on the local device is expected to take, before it runs."""

    device: str
    steps: int
    """Warm-up plus timed synced steps."""
    step: StepTime | None
    """The modelled step (None when not modelled; `missing` says why)."""
    missing: NoStepTime | None
    slow_half: SlowHalfPrecision | None
    """The spec's half dtype, when this CPU converts or emulates it."""
    load: float | None = None
    """The 1-minute load average when it exceeds the cores (CPU runs only): a busy machine,
    where steps take longer than the model's idle-CPU prediction."""
    cores: int | None = None
    loop_steps: int = 0
    """The steps run back to back after the synced ones (`measure(loop_steps=...)`); the
    window's filling step comes on top (`trainfit.measure.window`)."""

    @property
    def total_seconds(self) -> float | None:
        if self.step is None:
            return None
        filling = FILLING_STEPS if self.loop_steps else 0
        return self.step.seconds * (self.steps + filling + self.loop_steps)

    @property
    def long(self) -> bool:
        """Whether the run is predicted to take over `LONG_RUN_SECONDS`."""
        total = self.total_seconds
        return total is not None and total > LONG_RUN_SECONDS


def forecast(
    result: Estimate | None,
    kind: DeviceKind,
    precision: Precision,
    steps: int,
    features: CpuFeatures | None = None,
    load: float | None = None,
    loop_steps: int = 0,
) -> Forecast:
    """The forecast of `steps` real synced steps (warm-up included) then `loop_steps` back to
    back of an estimate's spec on a local device of `kind` (`result` None: no estimate, so no
    time); the half-precision warning on the CPU reads
    `features` (None: this host's), the busy-machine warning `load` (None: this host's 1-minute
    load average, where the OS gives one)."""
    slow = None
    half = _HALF.get(precision)
    busy = cores = None
    if kind is DeviceKind.CPU:
        features = features or cpu_features()
        if half is not None and features.half_support(half) is not HalfSupport.NATIVE:
            slow = slow_half_precision_of(half, features)
        if load is None and hasattr(os, "getloadavg"):
            load = os.getloadavg()[0]
        cores = features.cores
        if load is not None and cores and load > cores:
            busy = load
    if result is None:
        step, missing = None, NoStepTime(why=NoTime.NO_ESTIMATE)
    else:
        step, missing = result.step_time, result.step_time_missing
    return Forecast(
        device=kind.value if result is None else result.device.display,
        steps=steps,
        step=step,
        missing=missing,
        slow_half=slow,
        load=busy,
        cores=cores if busy is not None else None,
        loop_steps=loop_steps,
    )
