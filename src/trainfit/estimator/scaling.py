"""Device memory as a function of the micro-batch, from three traces.

Each allocation of a training step is either the same at every micro-batch (weights, optimizer
state, library handles) or grows in proportion to it (activations, their gradients, workspaces
sized by the batch): tracing at batches 2 and 3 gives, per event, nbytes(b) = n2 + (n3 - n2) *
(b - 2). A third trace, at batch 5, checks that every event is affine and that the ops are the
same; when one is not (a workspace rule with a minimum in it, a branch on the batch size), the
scaling says so and callers trace each batch they ask about instead. The caching allocator is
not affine (rounding, segment sizes, block reuse), so each batch's events are replayed through
it: as exact as a full estimate whenever the events are.

Known limitations: device memory is assumed to grow with the micro-batch when searching for the
largest one that fits (the allocator can make it dip by a segment; the search may then stop one
batch short); CUDA targets only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainfit.errors import SpecError
from trainfit.hardware.catalog import Device, DeviceKind, get_device
from trainfit.spec import TrainSpec
from trainfit.trace.costs import StepCosts, interpolate
from trainfit.trace.recorder import Event
from trainfit.trace.step import StepTrace, trace_step
from trainfit.trace.target import Target

PROBES = (2, 3, 5)
"""Micro-batches traced: two to fit each event's line, one to check it (not 1: BatchNorm cannot
train on one sample)."""
ROUNDING_BYTES = 16
"""How far off its line an event may be at the check batch and still count as affine."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EventCounts:
    """The step makes `counts[0]` and `counts[1]` allocation events at two probe batches."""

    counts: tuple[int, int]


@dataclass(frozen=True, kw_only=True, slots=True)
class OpsDiffer:
    """The step's ops differ between two probe batches, first at `ops` (one per batch)."""

    ops: tuple[str, str]


@dataclass(frozen=True, kw_only=True, slots=True)
class NotALine:
    """Op `op` allocates `nbytes` at the batches `PROBES`: the third is off the first two's
    line by more than `ROUNDING_BYTES`."""

    op: str
    nbytes: tuple[int, int, int]


NotAffine = EventCounts | OpsDiffer | NotALine
"""Why a step's memory is not a line in the micro-batch."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchScaling:
    """A traced step at a base micro-batch and each event's bytes per extra sample."""

    spec: TrainSpec
    device: Device
    base: StepTrace
    """The trace at micro-batch `spec.batch` (PROBES[0])."""
    per_sample: tuple[int, ...]
    """Bytes each event grows by per extra sample (0 for batch-independent events)."""
    affine: bool
    """Whether the check trace matched the line for every event."""
    why_not: NotAffine | None
    """What broke the line, when it did not hold."""
    far_costs: StepCosts | None = field(default=None, compare=False, repr=False)
    """Op costs of the trace at the last probe batch (each op's FLOPs and bytes are a line
    through the two)."""
    exact: dict[int, StepTrace] = field(default_factory=dict, compare=False, repr=False)
    """Traces made at other batches (batch 1, which can run other code paths than the line's
    batches): replayed instead of the line at those batches."""
    memo: dict[tuple[object, ...], object] = field(default_factory=dict, compare=False, repr=False)
    """Replays already made (~0.1 s each for big models), by batch and what else they depend
    on (the device's runtime profile and compute capability, the budget); shared by the
    copies of a scaling made for other devices."""

    def trace_at(self, batch: int) -> StepTrace:
        """The step's trace at `batch` (one traced there, else synthesised when affine, else
        traced now)."""
        if batch < 1:
            raise SpecError([f"batch must be a positive integer, got {batch}"])
        if batch in self.exact:
            return self.exact[batch]
        if not self.affine:
            return trace_step(
                dataclasses.replace(self.spec, batch=batch),
                target=Target.of(self.device),
            )
        events = [
            dataclasses.replace(event, nbytes=size) if grow else event
            for event, grow, size in zip(
                self.base.events, self.per_sample, self._sizes(batch), strict=True
            )
        ]
        return dataclasses.replace(self.base, events=events, costs=self.costs_at(batch))

    def costs_at(self, batch: int) -> StepCosts | None:
        """Op costs at `batch`: on the line through the probes' (None when their ops differ)."""
        if batch in self.exact:
            return self.exact[batch].costs
        base, far = self.base.costs, self.far_costs
        if base is None or far is None or not base.aligned(far):
            return None
        if batch == self.spec.batch:
            return base
        return interpolate(base, self.spec.batch, far, PROBES[2], batch)

    def _sizes(self, batch: int) -> list[int]:
        extra = batch - self.spec.batch
        return [
            event.nbytes + grow * extra
            for event, grow in zip(self.base.events, self.per_sample, strict=True)
        ]

    def _replayable(self, batch: int) -> tuple[StepTrace, list[int] | None]:
        """The trace to replay at `batch` and the event sizes to replay it with."""
        if batch < 1:
            raise SpecError([f"batch must be a positive integer, got {batch}"])
        if batch in self.exact:
            return self.exact[batch], None
        if self.affine:
            return self.base, self._sizes(batch)
        return self.trace_at(batch), None

    def fits(self, batch: int, budget: int) -> bool:
        """Whether micro-batch `batch` runs in `budget` device bytes (context included).

        NB: when the unconstrained peak is over the budget, the allocator's out-of-memory retry
        (releasing cached segments) is replayed: a step can run in less than its peak reserved,
        never in less than its peak allocated.
        """
        from trainfit.estimator.step import gpu_fits

        needed, allocated = self._replayed(batch)
        if needed <= budget:
            return True
        if allocated > budget:
            return False
        key = ("fits", batch, budget, *self._device_key())
        if key not in self.memo:
            spec = dataclasses.replace(self.spec, batch=batch)
            trace, sizes = self._replayable(batch)
            self.memo[key] = gpu_fits(trace, spec, self.device, budget, sizes)
        return bool(self.memo[key])

    def bracket(self, budget: int, limit: int) -> tuple[int, int | None]:
        """The largest batch up to `limit` known to fit `budget` (at least 1, which the caller
        has checked) and the smallest known not to (None when none is), from replays and
        searches already made."""
        low, high = 1, None
        device = self._device_key()
        for key, value in self.memo.items():
            if key[0] == "needed" and key[2:] == device and isinstance(value, tuple):
                batch = int(key[1])  # type: ignore[call-overload]
                if value[0] <= budget and batch <= limit:
                    low = max(low, batch)
                elif value[1] > budget and (high is None or batch < high):
                    high = batch
            elif key[0] == "fits" and key[2] == budget and key[3:] == device:
                batch = int(key[1])  # type: ignore[call-overload]
                if value and batch <= limit:
                    low = max(low, batch)
                elif not value and (high is None or batch < high):
                    high = batch
            elif key[0] == "boundary" and key[1] == budget and key[2:] == device:
                fit, not_fit = value  # type: ignore[misc]
                if fit <= limit:
                    low = max(low, fit)
                if high is None or not_fit < high:
                    high = not_fit
        if high is not None and high > limit:
            high = None  # nothing known inside the range
        return low, high

    def found(self, budget: int, fit: int, not_fit: int) -> None:
        """Remember a search's answer: `fit` fits `budget`, `not_fit` (= fit + 1) does not."""
        self.memo[("boundary", budget, *self._device_key())] = (fit, not_fit)

    def needed_bytes(self, batch: int) -> int:
        """Device memory needed (peak reserved + runtime context) at micro-batch `batch`.

        NB: below the base batch the line is extrapolated (a BatchNorm model cannot train on one
        sample at all; the figure is what the allocations would be).
        """
        return self._replayed(batch)[0]

    def _device_key(self) -> tuple[object, ...]:
        return self.device.runtime_key

    def _replayed(self, batch: int) -> tuple[int, int]:
        """Peak reserved and peak allocated at `batch`, each plus the runtime context."""
        from trainfit.estimator.step import gpu_memory

        key = ("needed", batch, *self._device_key())
        known = self.memo.get(key)
        if known is None:
            spec = dataclasses.replace(self.spec, batch=batch)
            trace, sizes = self._replayable(batch)
            result, context = gpu_memory(trace, spec, self.device, sizes=sizes)
            known = (result.peak_reserved_bytes + context, result.peak_allocated_bytes + context)
            self.memo[key] = known
        return known  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True, slots=True)
class MaxBatch:
    """The largest micro-batch whose step fits in a memory budget."""

    batch: int
    """0 when not even one sample fits."""
    needed_bytes: int
    """Device memory needed at `batch` (at 1 when `batch` is 0)."""
    next_needed_bytes: int | None
    """Device memory needed at `batch + 1` (None when the search stopped at its limit)."""
    budget_bytes: int
    exact: bool
    """True when every batch was replayed from affine events checked by a third trace."""
    device_name: str
    margin: float

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (bytes as integers)."""
        return {
            "device": self.device_name,
            "max_micro_batch": self.batch,
            "needed_bytes": self.needed_bytes,
            "next_needed_bytes": self.next_needed_bytes,
            "budget_bytes": self.budget_bytes,
            "margin": self.margin,
            "replayed_from_batch_scaling": self.exact,
        }


def scale_batch(spec: TrainSpec, passes_from: BatchScaling | None = None) -> BatchScaling:
    """Trace `spec` at micro-batches 2, 3 and 5 and fit each allocation's growth.

    `passes_from` is the scaling of the same step with another optimizer: its forward and
    backward passes are copied at each probe batch (see `trace_step`)."""
    device = get_device(spec.device)
    if device.kind not in (DeviceKind.CUDA, DeviceKind.MPS):
        raise SpecError(
            [f"device {device.name!r}: the batch search covers GPUs only; choose a GPU"]
        )
    traces = [
        trace_step(
            dataclasses.replace(spec, batch=b),
            target=Target.of(device),
            passes_from=passes_from.trace_at(b) if passes_from is not None else None,
        )
        for b in PROBES
    ]
    base, next_, check = traces
    why_not = _mismatch(base.events, next_.events) or _mismatch(base.events, check.events)
    per_sample: list[int] = []
    steps = PROBES[2] - PROBES[0]
    if why_not is None:
        for first, second, third in zip(base.events, next_.events, check.events, strict=True):
            grow = second.nbytes - first.nbytes
            # NB: a few bytes off the line is the rounding of a fitted workspace rule (cuDNN's
            # weight-gradient factor), not a different program: accepted.
            if abs(third.nbytes - (first.nbytes + steps * grow)) > ROUNDING_BYTES:
                why_not = NotALine(op=first.op, nbytes=(first.nbytes, second.nbytes, third.nbytes))
                break
            per_sample.append(grow)
    affine = why_not is None
    return BatchScaling(
        spec=dataclasses.replace(spec, batch=PROBES[0]),
        device=device,
        base=base,
        per_sample=tuple(per_sample) if affine else (),
        affine=affine,
        why_not=why_not,
        far_costs=check.costs,
    )


def _mismatch(a: list[Event], b: list[Event]) -> NotAffine | None:
    """Why two traces are not the same program (None when they are, up to sizes)."""
    if len(a) != len(b):
        return EventCounts(counts=(len(a), len(b)))
    keys: dict[int, int] = {}
    for x, y in zip(a, b, strict=True):
        same = (x.alloc, x.op, x.phase, x.iteration) == (y.alloc, y.op, y.phase, y.iteration)
        if not same or keys.setdefault(x.key, y.key) != y.key:
            return OpsDiffer(ops=(x.op, y.op))
    return None


def max_micro_batch(
    spec: TrainSpec | None = None,
    margin: float = 0.0,
    limit: int = 1 << 16,
    scaling: BatchScaling | None = None,
    *,
    sample: Any = None,
    **fields: Any,
) -> MaxBatch:
    """The largest micro-batch of `spec` whose step fits `spec.device` less `margin`.

    `margin` is the fraction of the device's memory kept free (0.1 keeps 10%). Without a
    TrainSpec, its fields as keyword arguments, as `estimate` takes them: a live `nn.Module`
    with its `sample` batch, `max_micro_batch(model=net, sample=x, device="rtx-4060")`.
    """
    if not isinstance(spec, TrainSpec) or fields or sample is not None:
        from trainfit.models.live import given_spec

        with given_spec("max_micro_batch", spec, fields, sample) as given:
            return max_micro_batch(given, margin, limit, scaling)
    if not isinstance(margin, (int, float)) or isinstance(margin, bool) or not 0 <= margin < 1:
        raise SpecError([f"margin must be a fraction in [0, 1), got {margin!r}"])
    scaling = scaling or scale_batch(spec)
    budget = int(scaling.device.memory_bytes * (1.0 - margin))
    needed: Callable[[int], int] = scaling.needed_bytes
    if not scaling.fits(1, budget):
        return MaxBatch(
            batch=0,
            needed_bytes=needed(1),
            next_needed_bytes=None,
            budget_bytes=budget,
            exact=scaling.affine,
            device_name=scaling.device.name,
            margin=margin,
        )
    low, high = scaling.bracket(budget, limit)
    at_limit = MaxBatch(
        batch=limit,
        needed_bytes=0,
        next_needed_bytes=None,
        budget_bytes=budget,
        exact=scaling.affine,
        device_name=scaling.device.name,
        margin=margin,
    )
    if low == limit:
        return dataclasses.replace(at_limit, needed_bytes=needed(limit))
    if high is None:
        bracket = _gallop(scaling, budget, limit, low)
        if bracket is None:
            return dataclasses.replace(at_limit, needed_bytes=needed(limit))
        low, high = bracket
    low, high = _regula_falsi(scaling, budget, low, high)
    scaling.found(budget, low, high)
    return MaxBatch(
        batch=low,
        needed_bytes=needed(low),
        next_needed_bytes=needed(low + 1),
        budget_bytes=budget,
        exact=scaling.affine,
        device_name=scaling.device.name,
        margin=margin,
    )


def _gallop(scaling: BatchScaling, budget: int, limit: int, low: int) -> tuple[int, int] | None:
    """A (fits, does not fit) bracket above `low`, which fits; None when `limit` fits."""
    needed = scaling.needed_bytes
    # NB: memory grows almost linearly with the batch: gallop up from where the line
    # through batch 1 and the largest batch known to fit meets the budget
    base = low if low > 1 else 2
    slope = (needed(base) - needed(1)) / (base - 1)
    guess = limit if slope <= 0 else int(1 + (budget - needed(1)) / slope)
    guess = min(limit, max(low + 1, guess))
    step = max(1, guess // 16)
    while True:
        if not scaling.fits(guess, budget):
            return low, guess
        if guess == limit:
            return None
        low, guess, step = guess, min(limit, guess + step), 2 * step


def _regula_falsi(scaling: BatchScaling, budget: int, low: int, high: int) -> tuple[int, int]:
    """Narrow a (fits, does not fit) bracket to neighbours."""
    needed = scaling.needed_bytes
    # NB: regula falsi between the bracket's ends (the Illinois variant: an end kept twice
    # counts half, so a convex curve, e.g. a peak moving from the optimizer step to the
    # backward pass, does not make it crawl), with a bisection step when a try gains little
    weight_low = weight_high = 1.0
    kept = ""
    while high - low > 1:
        under = (budget - needed(low)) * weight_low
        over = (needed(high) - budget) * weight_high
        width = high - low
        middle = low + int(width * under / (under + over)) if under + over > 0 else low + width // 2
        middle = min(max(middle, low + 1), high - 1)
        if scaling.fits(middle, budget):
            low = middle
            weight_high, weight_low = (weight_high / 2 if kept == "high" else 1.0), 1.0
            kept = "high"
        else:
            high = middle
            weight_low, weight_high = (weight_low / 2 if kept == "low" else 1.0), 1.0
            kept = "low"
    return low, high
