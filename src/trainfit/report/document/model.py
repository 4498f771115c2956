"""The report as data: everything the Markdown, JSON, HTML and plot renderers need.

A `Report` holds one `ModelSection` per model; each holds one `StageSection` per stage (one,
named "", for a plan without stages) with the typed plan (`trainfit.plan.options.Plan`),
each device's memory breakdown and memory-against-micro-batch curve, the verify commands and
the config files. Every other value is plain (str, int, float, bool, None, tuples and dicts
of them); `to_dict()` is the JSON, each plan as `trainfit.plan.words.plan_dict` gives it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from enum import Enum

from trainfit.plan.options import Plan
from trainfit.plan.stages import ScheduleOnDevice, schedule_dict
from trainfit.plan.words import plan_dict


def slug(name: str) -> str:
    """A file-name-safe form of a model's name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "model"


@dataclass(frozen=True, kw_only=True, slots=True)
class CurvePoint:
    """Device memory needed at one micro-batch."""

    micro_batch: int
    needed_bytes: int
    fits: bool
    """Whether it runs in the usable memory (the allocator's out-of-memory retry, which
    releases its cache, counted: a step can run in less than `needed_bytes`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceMemory:
    """One device's memory: the breakdown at the chosen micro-batch and the curve."""

    device: str
    display: str
    limit_bytes: int | None
    """The device's memory (None when the catalog lacks it)."""
    usable_bytes: int | None
    """The limit less the plan's margin."""
    micro_batch: int
    """The micro-batch of the breakdown (0: none)."""
    breakdown: tuple[tuple[str, int], ...] = ()
    """(component, bytes) at the peak, summing to the memory needed."""
    curve: tuple[CurvePoint, ...] = ()
    note: str = ""
    """Why there is no breakdown or curve, when there is none."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigFile:
    """A file written beside the report (a device's config or export)."""

    path: str
    """Relative to the report's directory, with forward slashes."""
    device: str
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Verify:
    """The trainfit commands that check one device's setting on the machine itself."""

    device: str
    commands: tuple[tuple[str, str], ...]
    """(what it checks, the command)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class InferenceRow:
    """One row of the optional inference table (see `report.document.serving`)."""

    device: str
    precision: str
    batch: int
    context: int
    """Prompt tokens (0 for a plain module's forward)."""
    memory_gib: float | None
    """Device memory needed (None where not estimated)."""
    fits: bool | None
    new_tokens: int = 0
    """Tokens generated per sequence (0 for a forward)."""
    kind: str = "generate"
    """"generate" (a causal LM's greedy generation), "forward" (one no_grad forward) or
    "refused" (not estimated: `note` says why)."""
    prefill_ms: float | None = None
    """The prompt's forward (generate), or the whole forward (forward)."""
    per_token_ms: float | None = None
    """One decode step of the batch (generate)."""
    decode_tokens_per_second: float | None = None
    """Generated tokens per second over the batch (generate)."""
    total_ms: float | None = None
    """The request's latency: prefill + (new_tokens - 1) decode steps, or the forward."""
    bound: str = ""
    """What the latency mostly waits on: host, device (arithmetic) or bandwidth."""
    labels: tuple[tuple[str, str], ...] = ()
    """(figure, how it was obtained)."""
    note: str = ""
    """Why there is no estimate, or the estimate's caveats."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimSetting:
    """The setting a document's figure is at (trainfit's figure is computed at it)."""

    micro_batch: int
    grad_accum: int = 1
    precision: str | None = None
    """None: the plan's precision on the device."""
    checkpointing: bool = False
    compile: bool = False
    """torch.compile: trainfit has no figure at such a setting (`NoFigure.COMPILED`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimVersus:
    """The other figure a comparison claim sets trainfit's against (see
    `trainfit.specfile.ClaimVersus`); a field left empty is the claim's, except `setting`."""

    compare: str
    """A `trainfit.specfile.ClaimCompare` value: times, percent_less or percent_more."""
    device: str | None = None
    setting: ClaimSetting | None = None
    """None: the plan's setting on the device."""
    model: str | None = None
    models: tuple[str, ...] = ()
    component: tuple[str, ...] = ()


class NoFigure(str, Enum):
    """Why trainfit has no figure to set beside a claim."""

    DOES_NOT_FIT = "does_not_fit"
    """The setting (or one GPU, where the claim is about one) does not hold the job."""
    NO_STEP_TIME = "no_step_time"
    """The device's step time is not modelled (`Missing.detail` says why)."""
    NO_RUN = "no_run"
    """The plan was given no data size, so no run hours or costs."""
    NO_PRICE = "no_price"
    """The catalog has no purchase price (or no cloud instance) for the device."""
    NO_POWER = "no_power"
    """The catalog has no power figure for the device."""
    NO_BREAKDOWN = "no_breakdown"
    """No memory breakdown was kept for the device."""
    NO_INFERENCE = "no_inference"
    """The inference row was refused or has no such figure (`detail` says why)."""
    COMPILED = "compiled"
    """The setting uses torch.compile, whose fused kernels trainfit does not model."""
    HOST_DEPENDENT = "host_dependent"
    """The CPU is planned against the RAM and the processor of the machine that runs
    trainfit, so a report meant to be the same on every machine does not plan it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Missing:
    """Why a claim has no trainfit figure, with the facts the reason takes."""

    why: NoFigure
    device: str = ""
    needed_bytes: int | None = None
    """Device memory the setting needs (does_not_fit)."""
    usable_bytes: int | None = None
    """The device's memory inside the margin (does_not_fit)."""
    detail: str = ""
    """The plan's own words for it (no_step_time, no_inference)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Claim:
    """A figure of the source document, to compare with trainfit's (see docs/report.md)."""

    what: str
    quantity: str
    value: float | tuple[float, float]
    """The document's figure, or a (low, high) range."""
    model: str | None = None
    device: str | None = None
    precision: str | None = None
    """The inference precision the figure is at (inference quantities; optional)."""
    batch: int | None = None
    """The inference batch the figure is at (inference quantities; optional)."""
    source: str = ""
    why: str = ""
    reason: str | None = None
    """A `trainfit.specfile.schema.ClaimReason` value: why the figures differ."""
    models: tuple[str, ...] = ()
    """Several models whose figures are summed (in place of `model`)."""
    stage: int | None = None
    """The stage (1 = the first) of a staged schedule; None: all."""
    component: tuple[str, ...] = ()
    """component_gib: the breakdown's components summed."""
    gpus: int | None = None
    """The GPUs the figure is on (1: one GPU, never a multi-GPU plan)."""
    setting: ClaimSetting | None = None
    """The document's setting, where trainfit's figure is computed at it."""
    versus: ClaimVersus | None = None
    """The figure compares trainfit's own with this other one (x times, percent less/more)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimCheck:
    """A claim beside trainfit's figure."""

    what: str
    model: str
    device: str
    quantity: str
    low: float
    high: float
    """The document's figure (low == high unless a range)."""
    trainfit: float | None
    """trainfit's figure (None when the device has no setting to measure it on)."""
    ratio: float | None
    """trainfit over the document (over the nearer end of a range; 1.0 inside it)."""
    agrees: bool | None
    """Within 25% (None without a trainfit figure)."""
    source: str = ""
    why: str = ""
    note: str = ""
    reason: str | None = None
    """The claim's typed reason (`ClaimReason` value)."""
    missing: Missing | None = None
    """Why there is no trainfit figure, when there is none."""
    setting: ClaimSetting | None = None
    """The document's setting the figure was computed at (None: the plan's)."""
    gpus: int | None = None
    """The GPUs the claim is about, when it names them."""
    samples: int | None = None
    """The run's samples per epoch (what a dataset_assumed reason names)."""
    component: tuple[str, ...] = ()
    """component_gib: the breakdown's components summed."""
    versus: ClaimVersus | None = None
    """The other figure of a comparison claim (`trainfit` is then the comparison)."""
    versus_device: str = ""
    """The other figure's device (a comparison claim)."""
    figures: tuple[float, float] | None = None
    """A comparison's two figures of the quantity: trainfit's own and the other one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StageSection:
    """One plan (a stage of a staged schedule, or the whole job)."""

    name: str
    """"" for a plan without stages."""
    epochs: float | None = None
    freeze: tuple[str, ...] = ()
    plan: Plan
    """The stage's plan: devices, verdicts, settings, tiers, ladder, times, costs (as JSON:
    `trainfit.plan.words.plan_dict`)."""
    memory: tuple[DeviceMemory, ...] = ()
    verify: tuple[Verify, ...] = ()
    configs: tuple[ConfigFile, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSection:
    """One model of the report."""

    name: str
    model: str
    parameters: int
    trainable_parameters: int
    tokens_per_sample: int | None
    stages: tuple[StageSection, ...]
    schedule: tuple[ScheduleOnDevice, ...] = ()
    """A staged plan's schedule per device (`StagedPlan.devices`)."""
    inference: tuple[InferenceRow, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """A whole report (see the module)."""

    title: str
    description: str = ""
    models: tuple[ModelSection, ...]
    claims: tuple[ClaimCheck, ...] = ()
    run: dict[str, object] | None = None
    """The run's data and prices (`RunSpec` as JSON), when given."""
    extra: dict[str, object] = field(default_factory=dict)
    """Sections other pieces add (name -> JSON value), rendered generically."""

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (each stage's plan as `plan_dict` gives it)."""
        out = _json(self)
        assert isinstance(out, dict)
        return out


def _json(value: object) -> object:
    """`dataclasses.asdict`, with each `Plan` and schedule as its JSON."""
    if isinstance(value, Plan):
        return plan_dict(value)
    if isinstance(value, ScheduleOnDevice):
        return schedule_dict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return type(value)(_json(v) for v in value)
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value
