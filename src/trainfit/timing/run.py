"""A whole training run: hours from the step time, data-parallel scaling, and what it costs.

Run totals: steps per epoch = ceil(samples / effective batch) (tokens are turned into samples
with the model's tokens per sample), per stage (e.g. a frozen backbone for 5 epochs,
then everything for 50), plus evaluation (a forward pass over `eval_fraction` of the training
samples each epoch). Over N GPUs of one kind (data parallel, DDP), each GPU runs 1/N of the
samples and the gradients are all-reduced over the catalog's interconnect (a ring: 2(N-1)/N
of the gradient bytes per GPU, at NCCL's measured bus bandwidth) plus DDP's bucket copies,
none of it assumed hidden under backward (as measured on 2 x H200; see `ddp_seconds`).

Cost: cloud instances at their dated on-demand and spot rates; a local device as electricity
(board power x hours x price per kWh) plus its purchase price spread over the hours it is used
in its life (total cost of ownership, e.g. over 3 years).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from trainfit.errors import SpecError, check_argument
from trainfit.hardware.catalog import Device, DeviceKind, catalog

if TYPE_CHECKING:
    from trainfit.estimator.result import Estimate
    from trainfit.timing.step import StepTime, TimeLabel

DEFAULT_KWH_PRICE = 0.18
"""USD per kWh: the US residential average the EIA forecast for 2026 (18.02 cents; Short-Term
Energy Outlook, December 2025, as reported by ConsumerAffairs, read 2026-11-26)."""
MAX_EPOCHS = 1e6
"""More epochs than this is a typo."""
DEFAULT_YEARS = 3
DEFAULT_HOURS_PER_YEAR = 1000
"""Hours a local device trains per year, for spreading its price (about 20 hours a week)."""
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CNY", "INR", "CAD", "AUD", "CHF", "KRW", "SEK", "BRL")
PCIE_GBS = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}
"""Per-direction bandwidth of an x16 link by generation (GB/s)."""
INTER_NODE_GBS = 50.0
"""Per-GPU bandwidth between machines assumed for multi-node runs (400 Gb/s InfiniBand)."""
NCCL_EFFICIENCY = 0.504
"""NCCL all-reduce bus bandwidth at DDP's 25 MB bucket over the link's one-way bandwidth:
227 GB/s of 450 on 2 x H200 over NVLink (benchmarks/timing/results/ddp_h200/allreduce_2.json,
2026-11-26, NCCL 2.28.9); assumed for every link."""
DDP_COPIES = 4
"""Passes over the gradients DDP adds (into its buckets and back, each a read and a write;
`gradient_as_bucket_view=False`, the default)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Stage:
    """A part of the run with its own settings (e.g. a frozen backbone)."""

    name: str
    epochs: float
    step: StepTime
    """One optimizer step of this stage's setting on one GPU, over that GPU's share of the
    effective batch (all of it on one GPU)."""
    gradient_bytes: int | None = None
    """Bytes of this stage's gradients (its trainable parameters), for the all-reduce; None:
    the run's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSpec:
    """What the run covers: data, epochs, evaluation, GPUs, prices."""

    samples: int | None = None
    """Training samples per epoch."""
    tokens: int | None = None
    """Training tokens per epoch (for language models; converted with tokens per sample)."""
    epochs: float = 1.0
    eval_fraction: float = 0.0
    """Evaluation samples per epoch as a fraction of the training samples (forward only)."""
    data_rate: float | None = None
    """Samples per second one process's data loader delivers (each GPU's process has its own).
    The loader works ahead in its worker processes, so a step takes the longer of its compute
    and its share of the batch at this rate; None: the input pipeline is not counted."""
    gpus: int = 1
    kwh_price: float = DEFAULT_KWH_PRICE
    currency: str = "USD"
    usd_rate: float | None = None
    """Units of `currency` per US dollar (catalog prices are in USD); required for another
    currency, 1 for USD."""
    years: float = DEFAULT_YEARS
    hours_per_year: float = DEFAULT_HOURS_PER_YEAR
    watts: float | None = None
    """Power the local machine draws while training (default: the GPU's board power)."""
    deadline_hours: float | None = None
    price_overrides: dict[str, float] = field(default_factory=dict)
    """USD per hour by instance name, replacing the catalog's on-demand rate."""

    def __post_init__(self) -> None:
        problems = []
        for name in ("samples", "tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if self.samples is not None and self.tokens is not None:
            problems.append("give samples or tokens per epoch, not both")
        positive = {
            "epochs": self.epochs,
            "kwh_price": self.kwh_price,
            "years": self.years,
            "hours_per_year": self.hours_per_year,
        }
        if self.usd_rate is not None:
            positive["usd_rate"] = self.usd_rate
        if isinstance(self.epochs, (int, float)) and self.epochs > MAX_EPOCHS:
            problems.append(f"epochs must be at most {MAX_EPOCHS:g}, got {self.epochs!r}")
        if self.watts is not None:
            positive["watts"] = self.watts
        if self.deadline_hours is not None:
            positive["deadline_hours"] = self.deadline_hours
        if self.data_rate is not None:
            positive["data_rate"] = self.data_rate
        for name, value in positive.items():
            if not isinstance(value, (int, float)) or not 0 < value < math.inf:
                problems.append(f"{name} must be a positive number, got {value!r}")
        if not isinstance(self.gpus, int) or self.gpus < 1:
            problems.append(f"gpus must be a positive integer, got {self.gpus!r}")
        if not 0 <= self.eval_fraction <= 10:
            problems.append(f"eval_fraction must be between 0 and 10, got {self.eval_fraction!r}")
        if self.currency not in CURRENCIES:
            problems.append(
                f"unknown currency {self.currency!r}: use one of {', '.join(CURRENCIES)}"
            )
        elif self.currency == "USD" and self.usd_rate not in (None, 1.0):
            problems.append(
                f"usd_rate (--fx) {self.usd_rate} given for USD: give --currency too, or drop it"
            )
        elif self.currency != "USD" and self.usd_rate is None:
            problems.append(
                f"currency {self.currency} needs its rate to the US dollar (usd_rate / --fx, "
                "units per USD): catalog prices are in USD"
            )
        known = {i.name for i in catalog().instances.values()}
        for name, price in self.price_overrides.items():
            if name not in known:
                problems.append(f"price override for unknown instance {name!r}")
            elif not isinstance(price, (int, float)) or not math.isfinite(price) or price < 0:
                problems.append(f"price override for {name} must be >= 0 USD/hour, got {price!r}")
        if problems:
            raise SpecError(problems)

    @property
    def rate(self) -> float:
        """Units of the currency per US dollar."""
        return 1.0 if self.usd_rate is None else self.usd_rate

    @property
    def sized(self) -> bool:
        return self.samples is not None or self.tokens is not None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunTime:
    """Hours of a run on one device kind."""

    hours: float
    steps: int
    step_seconds: float
    """One optimizer step on the GPUs used, communication included, averaged over the
    stages (evaluation excluded)."""
    gpus: int
    communication_seconds: float
    """What DDP adds per step (the largest over the stages; 0 on one GPU)."""
    label: TimeLabel
    evaluation_hours: float = 0.0
    input_seconds: float = 0.0
    """One optimizer step's share of the batch at the data loader's rate (0: not given)."""
    input_bound: float = 0.0
    """How many times its compute a step waits on its data: input_seconds over the step's
    compute and communication, where over 1 (0: never input-bound)."""


class Missing(StrEnum):
    """A figure a cost line lacks, or where its price came from."""

    NO_ON_DEMAND_PRICE = "no-on-demand-price"
    """The catalog has no on-demand price for the instance."""
    USER_PRICE = "user-price"
    """The on-demand price was given by the user."""
    NO_POWER = "no-power"
    """The catalog has no power figure for the device (and none was given)."""
    NO_PURCHASE_PRICE = "no-purchase-price"
    """The catalog has no purchase price for the device (or one in another currency)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NoSplit:
    """An instance whose GPU count the effective batch does not split over: no hours."""

    gpus: int


@dataclass(frozen=True, kw_only=True, slots=True)
class UnconvertedPrice:
    """A purchase price in another currency than USD: not converted, left out."""

    currency: str


@dataclass(frozen=True, kw_only=True, slots=True)
class BoardPower:
    """The power used is the GPUs' rated board power (the host adds more)."""

    gpus: int
    watts: float
    """One GPU's board power."""


CostNote = Missing | NoSplit | UnconvertedPrice | BoardPower
"""A note of a cost line, a typed fact (words: `trainfit.plan.cost_words`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CostLine:
    """One way to pay for the run."""

    option: str
    """An instance name, or "local <device>"."""
    kind: str
    """"cloud" or "local"."""
    hours: float
    on_demand: float | None = None
    spot: float | None = None
    electricity: float | None = None
    energy_kwh: float | None = None
    amortisation: float | None = None
    """The share of the purchase price this run uses up."""
    ownership: float | None = None
    """Purchase price plus electricity for `years` at `hours_per_year`."""
    currency: str = "USD"
    notes: tuple[CostNote, ...] = ()
    """What to know about this line (words: `trainfit.plan.cost_words`)."""

    @property
    def total(self) -> float | None:
        """What the run costs: on-demand in the cloud, electricity + amortisation locally."""
        if self.kind == "cloud":
            return self.on_demand
        if self.electricity is None:
            return None
        return self.electricity + (self.amortisation or 0.0)


def interconnect_gbs(device: Device, gpus: int, per_machine: int = 8) -> float:
    """Per-GPU, per-direction bandwidth of the all-reduce among `gpus` GPUs: InfiniBand
    between machines (assumed 400 Gb/s per GPU), else NVLink (half its both-ways figure),
    else the PCIe generation's x16 link (gen 4 when the catalog has none)."""
    if gpus > per_machine:
        return INTER_NODE_GBS
    nvlink = device.nvlink_gbs.value
    if nvlink:
        return float(nvlink) / 2
    gen = device.pcie_gen.value
    return PCIE_GBS.get(int(gen), 32.0) if gen else PCIE_GBS[4]


def run_time(
    stages: Sequence[Stage],
    effective_batch: int,
    run: RunSpec,
    device: Device,
    gradient_bytes: int,
    tokens_per_sample: int | None = None,
) -> RunTime:
    """Hours of the run's stages on `run.gpus` GPUs of `device`, each stage's step being one
    GPU's step over its share of `effective_batch` (data parallel)."""
    if not run.sized:
        raise SpecError(["give the data size: samples or tokens per epoch"])
    samples = _samples_per_epoch(run, tokens_per_sample)
    if not stages:
        raise SpecError(["a run needs at least one stage"])
    if run.gpus > 1 and device.kind is not DeviceKind.CUDA:
        raise SpecError(
            [f"runs over several GPUs are planned for CUDA GPUs only, not {device.display}"]
        )
    if effective_batch % run.gpus:
        raise SpecError(
            [
                f"an effective batch of {effective_batch} does not split over {run.gpus} GPUs: "
                f"use a multiple of {run.gpus}"
            ]
        )
    steps_per_epoch = math.ceil(samples / effective_batch)
    # NB: the loader's workers prefetch, so loading overlaps compute: a step takes the longer
    load = effective_batch / run.gpus / run.data_rate if run.data_rate else 0.0
    bound = 0.0
    training = evaluation = 0.0
    steps = 0
    communication = 0.0
    labels = {stage.step.label for stage in stages}
    from trainfit.timing.step import TimeLabel

    order = (TimeLabel.MODELLED, TimeLabel.CALIBRATED, TimeLabel.MEASURED)
    label = next((x for x in order if x in labels), TimeLabel.MODELLED)
    for stage in stages:
        step = stage.step
        added = 0.0
        if run.gpus > 1:
            grads = gradient_bytes if stage.gradient_bytes is None else stage.gradient_bytes
            added = ddp_seconds(device, run.gpus, grads)
            communication = max(communication, added)
            label = TimeLabel.MODELLED
        stage_steps = math.ceil(steps_per_epoch * stage.epochs)
        compute = step.seconds + added
        if load > compute:
            bound = max(bound, load / compute)
        training += stage_steps * max(compute, load)
        # NB: evaluation is a forward pass per micro-batch over each GPU's share
        micro_load = step.micro_batch / run.data_rate if run.data_rate else 0.0
        evaluation += (
            stage.epochs
            * run.eval_fraction
            * samples
            / run.gpus
            / step.micro_batch
            * max(step.forward_seconds, micro_load)
        )
        steps += stage_steps
    return RunTime(
        hours=(training + evaluation) / 3600,
        steps=steps,
        step_seconds=training / max(1, steps),
        gpus=run.gpus,
        communication_seconds=communication,
        label=label,
        evaluation_hours=evaluation / 3600,
        input_seconds=load,
        input_bound=bound,
    )


def _samples_per_epoch(run: RunSpec, tokens_per_sample: int | None) -> int:
    if run.tokens is None:
        return run.samples or 0
    if not tokens_per_sample:
        raise SpecError(["tokens per epoch need a sequence model; give samples per epoch instead"])
    return math.ceil(run.tokens / tokens_per_sample)


def ddp_seconds(device: Device, gpus: int, gradient_bytes: int) -> float:
    """What DDP adds to a step: the ring all-reduce of the gradients at NCCL's measured bus
    bandwidth, none of it hidden under backward, plus DDP's bucket copies.

    NB: DDP overlaps its all-reduces with backward in principle; on 2 x H200 (NVLink) it
    added 0 to 31 ms to five steps, at least the ring time in four of them
    (benchmarks/timing/results/ddp_h200.md), so none is assumed hidden."""
    from trainfit.timing.constants import calibration

    link = interconnect_gbs(device, gpus)
    ring = 2 * (gpus - 1) / gpus * gradient_bytes / (link * 1e9 * NCCL_EFFICIENCY)
    bandwidth = float(device.memory_bandwidth_gbs.value or 0) * 1e9
    copies = (
        DDP_COPIES * gradient_bytes / (bandwidth * calibration().memory_efficiency)
        if bandwidth
        else 0.0
    )
    return ring + copies


def cloud_costs(device: Device, hours_for: dict[int, float], run: RunSpec) -> list[CostLine]:
    """Each catalog instance with GPUs of `device`: the run's hours on that many GPUs
    (`hours_for`, by GPU count) at its rates; an instance whose GPU count has no hours (the
    effective batch does not split over it) is listed with a note."""
    out = []
    for inst in catalog().instances.values():
        try:
            same = catalog().device(inst.gpu).name == device.name
        except Exception:  # an instance naming a device not in the catalog: not this one
            same = False
        if not same or not inst.gpu_count.value:
            continue
        count = int(inst.gpu_count.value)
        hours = hours_for.get(count)
        if hours is None:
            out.append(
                CostLine(
                    option=inst.name,
                    kind="cloud",
                    hours=math.nan,
                    currency=run.currency,
                    notes=(NoSplit(gpus=count),),
                )
            )
            continue
        rate = run.price_overrides.get(inst.name, inst.on_demand_usd_per_hour.value)
        spot = inst.spot_usd_per_hour.value
        notes = () if rate is not None else (Missing.NO_ON_DEMAND_PRICE,)
        if inst.name in run.price_overrides:
            notes = (Missing.USER_PRICE,)
        out.append(
            CostLine(
                option=inst.name,
                kind="cloud",
                hours=hours,
                on_demand=None if rate is None else rate * hours * run.rate,
                spot=None if spot is None else spot * hours * run.rate,
                currency=run.currency,
                notes=notes,
            )
        )
    return out


def local_cost(device: Device, hours: float, run: RunSpec) -> CostLine:
    """Electricity and the share of the purchase price of running on `run.gpus` of one's own
    `device` (`run.watts` is the whole machine's draw when given)."""
    gpus = run.gpus
    board = device.tdp_watts.value
    watts = run.watts if run.watts is not None else (None if board is None else board * gpus)
    price = device.price.amount.value if device.price is not None else None
    notes: list[CostNote] = []
    if price is not None and device.price.currency != "USD":
        notes.append(UnconvertedPrice(currency=device.price.currency))
        price = None
    elif price is not None:
        price *= gpus
    if run.watts is None and board is not None:
        notes.append(BoardPower(gpus=gpus, watts=board))
    if watts is None:
        notes.append(Missing.NO_POWER)
    energy = None if watts is None else watts * hours / 1000
    electricity = None if energy is None else energy * run.kwh_price * run.rate
    amortisation = ownership = None
    if price is not None:
        life_hours = run.years * run.hours_per_year
        amortisation = price * run.rate * hours / life_hours
        ownership = price * run.rate + (
            0.0 if watts is None else watts * life_hours / 1000 * run.kwh_price * run.rate
        )
    else:
        notes.append(Missing.NO_PURCHASE_PRICE)
    return CostLine(
        option=f"local {gpus} x {device.name}" if gpus > 1 else f"local {device.name}",
        kind="local",
        hours=hours,
        electricity=electricity,
        energy_kwh=energy,
        amortisation=amortisation,
        ownership=ownership,
        currency=run.currency,
        notes=tuple(notes),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class OnlyUnpriced:
    """Only options without a full price finish by the deadline."""

    deadline_hours: float
    options: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class NoneInTime:
    """No option finishes by the deadline; the closest does in `hours`."""

    deadline_hours: float
    closest: str
    hours: float


DeadlineMissed = OnlyUnpriced | NoneInTime
"""Why no option is the cheapest by the deadline (words: `trainfit.plan.cost_words`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Recommendation:
    cheapest: str | None
    fastest: str | None
    cheapest_by_deadline: str | None
    missed: DeadlineMissed | None = None
    """Why there is no cheapest option by the deadline, when one was given."""


def recommend(lines: Sequence[CostLine], deadline_hours: float | None) -> Recommendation:
    """Cheapest, fastest, and cheapest that finishes by the deadline (or the closest)."""
    # NB: a local device without a purchase price would rank on electricity alone
    priced = [
        line
        for line in lines
        if line.total is not None and (line.kind == "cloud" or line.amortisation is not None)
    ]
    cheapest = min(priced, key=lambda line: line.total or 0.0, default=None)
    timed = [line for line in lines if not math.isnan(line.hours)]
    fastest = min(timed, key=lambda line: line.hours, default=None)
    by_deadline = None
    missed: DeadlineMissed | None = None
    if deadline_hours is not None:
        meeting = [line for line in priced if line.hours <= deadline_hours]
        unpriced = tuple(
            line.option for line in lines if line.hours <= deadline_hours and line not in priced
        )
        if meeting:
            by_deadline = min(meeting, key=lambda line: line.total or 0.0).option
        elif unpriced:
            missed = OnlyUnpriced(deadline_hours=deadline_hours, options=unpriced)
        elif fastest is not None:
            missed = NoneInTime(
                deadline_hours=deadline_hours, closest=fastest.option, hours=fastest.hours
            )
    return Recommendation(
        cheapest=cheapest.option if cheapest else None,
        fastest=fastest.option if fastest else None,
        cheapest_by_deadline=by_deadline,
        missed=missed,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEstimate:
    """A run on one device: its hours, what it costs, the recommendations."""

    run: RunSpec
    time: RunTime
    costs: tuple[CostLine, ...]
    recommendation: Recommendation


def run_estimate(
    stages: Sequence[Stage],
    effective_batch: int,
    run: RunSpec,
    device: Device,
    gradient_bytes: int,
    tokens_per_sample: int | None,
    hours_for: dict[int, float] | None = None,
) -> RunEstimate:
    """The run's hours on `run.gpus` GPUs, its costs (one's own GPUs; each catalog instance of
    this GPU at the hours `hours_for` gives for its GPU count) and the recommendations."""
    time = run_time(stages, effective_batch, run, device, gradient_bytes, tokens_per_sample)
    costs = [local_cost(device, time.hours, run)] if device.kind is not DeviceKind.CPU else []
    if device.kind is DeviceKind.CUDA:
        costs += cloud_costs(device, hours_for or {run.gpus: time.hours}, run)
    return RunEstimate(
        run=run,
        time=time,
        costs=tuple(costs),
        recommendation=recommend(costs, run.deadline_hours),
    )


def estimate_run(result: Estimate, run: RunSpec, stages: Sequence[Stage] = ()) -> RunEstimate:
    """The run of `result`'s step on each of `run.gpus` GPUs (so the effective batch is
    batch x accumulation x GPUs), in `stages` when given (each with its own step time), else
    `run.epochs` of `result`'s step."""
    if not all(hasattr(result, name) for name in ("spec", "step_time", "fits", "device")):
        # NB: an Estimate (a layer above) is known by what is read of it here
        got = type(result).__name__
        hint = "make one with estimate(model=..., device=...)"
        raise SpecError([f"estimate_run: result must be an Estimate, got {got}: {hint}"])
    check_argument("estimate_run", "run", run, RunSpec, "RunSpec(samples=..., epochs=...)")
    for stage in stages:
        check_argument("estimate_run", "stages", stage, Stage, "a list of Stage(...)")
    if result.step_time is None:
        raise SpecError(["this estimate has no step time, so no run time"])
    if result.fits is False:
        raise SpecError(
            [
                f"the step does not fit {result.device.name}, so its run is not priced: find "
                "the micro-batch that fits (max_micro_batch) or the settings that fit (plan)"
            ]
        )
    spec = result.spec
    effective = spec.batch * spec.grad_accum * run.gpus
    grad_bytes = result.trainable_parameter_count * spec.precision.param_dtype.itemsize
    if not stages:
        stages = [Stage(name="train", epochs=run.epochs, step=result.step_time)]
    per_gpu = spec.batch * spec.grad_accum
    hours_for = {}
    if result.device.kind is DeviceKind.CUDA:
        # NB: each GPU runs the estimated step, so N GPUs take N times the samples per step
        for n in sorted({1, 2, 4, 8, 16, run.gpus}):
            hours_for[n] = run_time(
                stages,
                per_gpu * n,
                dataclasses.replace(run, gpus=n),
                result.device,
                grad_bytes,
                result.step_time_tokens,
            ).hours
    return run_estimate(
        stages, effective, run, result.device, grad_bytes, result.step_time_tokens, hours_for
    )
