"""`check_plan_file()`: a memory guard for CI. Each model of a spec file, planned as
`trainfit plan` plans it, must fit every device the file names, and its device memory must not
have grown more than a tolerance over a committed baseline (`trainfit.specfile.baseline`).

A model x device passes when the plan fits it (comfortably or with the listed changes) and,
with a baseline, the plan keeps the baseline's setting (precision, checkpointing, optimizer,
micro-batch and accumulation) and needs at most `1 + tolerance` times the baseline's memory.
A changed setting fails: the plan fell to another rung or micro-batch, so the memory at the old
setting is no longer what is planned (a model that grew usually shows up there first).

Nothing is written but the baseline, and only when asked (`write_baseline`): the spec file's
`outputs` (report, configs, exports) and its serving estimates are left out of a check.

Known limitations: the figures are the plan's estimates, not measurements; another torch or
transformers can move them slightly (the baseline records the versions that computed it,
`CheckResult.versions_changed` lists those that differ). Every device of the spec file must
fit: a device the model is only compared against belongs in another spec file.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from trainfit.errors import SpecError
from trainfit.plan.options import CpuShort, CpuSized, DevicePlan, GpuShort, Plan, Verdict
from trainfit.plan.stages import StagedPlan
from trainfit.progress import Reporter
from trainfit.specfile.baseline import Baseline, Footprint, current_versions, write_baseline
from trainfit.specfile.run import PlanFileResult, run_plan_file
from trainfit.specfile.schema import PlanFile

DEFAULT_TOLERANCE = 0.02
"""The fraction a model's device memory may grow over its baseline before the check fails."""

NO_OUTPUTS = {
    "report": None,
    "config_dir": None,
    "export": (),
    "export_dir": None,
    "json": False,
    "inference": False,
}
"""Plan options a check overrides: it writes nothing and estimates no serving."""


class Outcome(str, Enum):
    """What the check found for one model on one device."""

    FITS = "fits"
    """Fits; within the tolerance of the baseline (or no baseline given)."""
    SHRANK = "shrank"
    """Fits, and needs less than the baseline by more than the tolerance (passes)."""
    GREW = "grew"
    """Needs more than the baseline by more than the tolerance."""
    SETTING_CHANGED = "setting changed"
    """The plan's setting is not the baseline's."""
    NOT_IN_BASELINE = "not in baseline"
    """The baseline has no figure for this model on this device."""
    DOES_NOT_FIT = "does not fit"
    """No setting of one device holds the step."""
    NOT_ESTIMATED = "not estimated"
    """The device's memory is unknown (the catalog has no size for it)."""


FAILING = frozenset(
    {
        Outcome.GREW,
        Outcome.SETTING_CHANGED,
        Outcome.NOT_IN_BASELINE,
        Outcome.DOES_NOT_FIT,
        Outcome.NOT_ESTIMATED,
    }
)
"""The outcomes that fail a check."""

BASELINE_OUTCOMES = frozenset({Outcome.GREW, Outcome.SETTING_CHANGED, Outcome.NOT_IN_BASELINE})
"""The failing outcomes that updating the baseline would clear (when the change is intended)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceCheck:
    """One model (or one stage of a staged model) on one device."""

    model: str
    """The spec file's name for it (`name / stage` for a stage of a staged plan)."""
    device: str
    display: str
    verdict: Verdict
    usable_bytes: int | None
    """The device's memory inside the plan's margin (None when unknown)."""
    now: Footprint | None
    """The plan's setting and memory now (None: nothing fits)."""
    baseline: Footprint | None
    """The baseline's (None: no baseline given, or none for this pair)."""
    outcome: Outcome

    @property
    def growth(self) -> float | None:
        """Memory now over the baseline's, minus one (None when not comparable)."""
        if self.now is None or self.baseline is None or self.baseline.needed_bytes <= 0:
            return None
        return self.now.needed_bytes / self.baseline.needed_bytes - 1.0

    @property
    def passed(self) -> bool:
        return self.outcome not in FAILING


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckResult:
    """A spec file checked."""

    source: str
    """The spec file."""
    tolerance: float
    baseline: Path | None
    """The baseline compared with (None: fits only)."""
    checks: tuple[DeviceCheck, ...]
    versions_changed: tuple[tuple[str, str, str], ...] = ()
    """(package, the baseline's version, this one's) where they differ."""

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> tuple[DeviceCheck, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def footprints(self) -> dict[tuple[str, str], Footprint]:
        """What a baseline written now records: every pair that fits."""
        return {(c.model, c.device): c.now for c in self.checks if c.now is not None}


def check_tolerance(tolerance: float) -> float:
    """`tolerance` when it is a fraction in [0, 1); SpecError naming it otherwise."""
    if not 0.0 <= tolerance < 1.0 or tolerance != tolerance:
        raise SpecError(
            [f"tolerance must be a fraction in [0, 1) (0.02 = 2% growth), got {tolerance}"]
        )
    return tolerance


def check_plan_file(
    plan_file: PlanFile,
    *,
    baseline: Baseline | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: Reporter | None = None,
) -> CheckResult:
    """Plan every model of `plan_file` (as `run_plan_file` does, writing nothing) and check
    each against every device of the file and against `baseline` (`compare`)."""
    check_tolerance(tolerance)
    planned = run_plan_file(plan_file, NO_OUTPUTS, progress=progress)
    return compare(planned, baseline=baseline, tolerance=tolerance)


def compare(
    planned: PlanFileResult,
    *,
    baseline: Baseline | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> CheckResult:
    """Check a planned spec file: every model fits every device, and grew no more than
    `tolerance` over `baseline` (None: fits only)."""
    check_tolerance(tolerance)
    checks: list[DeviceCheck] = []
    for model in planned.models:
        name = str(model.name)
        if model.plan is None:  # NB: a serving-only model: nothing to check, said
            raise SpecError(
                [f"{planned.plan_file.source}: model {name} has no training plan to check"]
            )
        for label, plan in _plans(name, model.plan):
            checks += [_check(label, plan, d, baseline, tolerance) for d in plan.devices]
    return CheckResult(
        source=planned.plan_file.source,
        tolerance=tolerance,
        baseline=None if baseline is None else baseline.path,
        checks=tuple(checks),
        versions_changed=_versions_changed(baseline),
    )


def _plans(name: str, planned: Plan | StagedPlan) -> list[tuple[str, Plan]]:
    if isinstance(planned, Plan):
        return [(name, planned)]
    return [(f"{name} / {stage.name}", stage.plan) for stage in planned.stages]


def _check(
    model: str,
    plan: Plan,
    device: DevicePlan,
    baseline: Baseline | None,
    tolerance: float,
) -> DeviceCheck:
    now = None
    if device.setting is not None:
        s = device.setting
        now = Footprint(
            needed_bytes=s.needed_bytes,
            precision=s.precision,
            checkpointing=s.checkpointing,
            optimizer=s.optimizer,
            micro_batch=s.micro_batch,
            grad_accum=s.grad_accum,
        )
    before = None if baseline is None else baseline.footprints.get((model, device.device))
    return DeviceCheck(
        model=model,
        device=device.device,
        display=device.display,
        verdict=device.verdict,
        usable_bytes=_usable(plan, device),
        now=now,
        baseline=before,
        outcome=_outcome(device.verdict, now, before, baseline is not None, tolerance),
    )


def _outcome(
    verdict: Verdict,
    now: Footprint | None,
    before: Footprint | None,
    compared: bool,
    tolerance: float,
) -> Outcome:
    if verdict is Verdict.NOT_ESTIMATED:
        return Outcome.NOT_ESTIMATED
    if verdict is Verdict.NO or now is None:
        return Outcome.DOES_NOT_FIT
    if not compared:
        return Outcome.FITS
    if before is None:
        return Outcome.NOT_IN_BASELINE
    if not now.same_setting(before):
        return Outcome.SETTING_CHANGED
    if now.needed_bytes > before.needed_bytes * (1.0 + tolerance):
        return Outcome.GREW
    if now.needed_bytes < before.needed_bytes * (1.0 - tolerance):
        return Outcome.SHRANK
    return Outcome.FITS


def _usable(plan: Plan, device: DevicePlan) -> int | None:
    """The device's memory inside the plan's margin, as the plan measured it."""
    note = device.note
    if isinstance(note, GpuShort):
        return int(note.usable_bytes)
    if isinstance(note, (CpuSized, CpuShort)):
        return int((1.0 - plan.margin) * note.ram_bytes)
    from trainfit.hardware.catalog import get_device

    memory = get_device(device.device).memory_bytes
    return int((1.0 - plan.margin) * memory) if memory else None


def _versions_changed(baseline: Baseline | None) -> tuple[tuple[str, str, str], ...]:
    if baseline is None:
        return ()
    now = current_versions()
    return tuple(
        (package, version, now.get(package, "not installed"))
        for package, version in sorted(baseline.versions.items())
        if now.get(package, "not installed") != version
    )


def save_baseline(result: CheckResult, path: Path | str) -> None:
    """Write `result`'s footprints as the baseline at `path` (atomically); SpecError naming
    every model x device that does not fit, and nothing written, when any does not."""
    short = [
        f"{c.model} on {c.device}: {c.outcome.value}"
        for c in result.checks
        if c.outcome in (Outcome.DOES_NOT_FIT, Outcome.NOT_ESTIMATED)
    ]
    if short:
        raise SpecError([f"baseline {path} not written: {s}" for s in short])
    write_baseline(path, result.footprints())
