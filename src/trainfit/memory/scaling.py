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

from trainfit.errors import SpecError
from trainfit.hardware.catalog import Device, get_device
from trainfit.spec import TrainSpec
from trainfit.trace.recorder import Event
from trainfit.trace.step import StepTrace, trace_step

PROBES = (2, 3, 5)
"""Micro-batches traced: two to fit each event's line, one to check it (not 1: BatchNorm cannot
train on one sample)."""
ROUNDING_BYTES = 16
"""How far off its line an event may be at the check batch and still count as affine."""


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
    why_not: str | None
    """What broke the line, when it did not hold."""
    _needed: dict[int, int] = field(default_factory=dict, init=False, compare=False, repr=False)
    _fits: dict[tuple[int, int], bool] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """Device memory needed per batch already replayed (replays of big models take ~0.2 s)."""

    def trace_at(self, batch: int) -> StepTrace:
        """The step's trace at `batch` (synthesised when affine, else traced)."""
        if batch < 1:
            raise SpecError([f"batch must be a positive integer, got {batch}"])
        if not self.affine:
            return trace_step(
                dataclasses.replace(self.spec, batch=batch),
                compute_capability=self.device.compute_capability,
            )
        extra = batch - self.spec.batch
        events = [
            dataclasses.replace(event, nbytes=event.nbytes + grow * extra) if grow else event
            for event, grow in zip(self.base.events, self.per_sample, strict=True)
        ]
        return dataclasses.replace(self.base, events=events)

    def fits(self, batch: int, budget: int) -> bool:
        """Whether micro-batch `batch` runs in `budget` device bytes (context included).

        NB: when the unconstrained peak is over the budget, the allocator's out-of-memory retry
        (releasing cached segments) is replayed: a step can run in less than its peak reserved.
        """
        from trainfit.estimate import cuda_fits

        if self.needed_bytes(batch) <= budget:
            return True
        key = (batch, budget)
        if key not in self._fits:
            spec = dataclasses.replace(self.spec, batch=batch)
            self._fits[key] = cuda_fits(self.trace_at(batch), spec, self.device, budget)
        return self._fits[key]

    def needed_bytes(self, batch: int) -> int:
        """Device memory needed (peak reserved + runtime context) at micro-batch `batch`.

        NB: below the base batch the line is extrapolated (a BatchNorm model cannot train on one
        sample at all; the figure is what the allocations would be).
        """
        from trainfit.estimate import cuda_memory

        known = self._needed.get(batch)
        if known is not None:
            return known
        spec = dataclasses.replace(self.spec, batch=batch)
        result, context = cuda_memory(self.trace_at(batch), spec, self.device)
        self._needed[batch] = result.peak_reserved_bytes + context
        return self._needed[batch]


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


def scale_batch(spec: TrainSpec, first: StepTrace | None = None) -> BatchScaling:
    """Trace `spec` at micro-batches 2, 3 and 5 and fit each allocation's growth; `first` is
    the trace at batch 2 when the caller already has it."""
    device = get_device(spec.device)
    if device.kind != "cuda":
        raise SpecError(
            [f"device {device.name!r}: the batch search covers CUDA targets only; choose a GPU"]
        )
    traces = [
        first
        if first is not None and b == PROBES[0]
        else trace_step(
            dataclasses.replace(spec, batch=b), compute_capability=device.compute_capability
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
                why_not = (
                    f"op {first.op} allocates {first.nbytes}, {second.nbytes} and "
                    f"{third.nbytes} bytes at batches {PROBES}: not a line"
                )
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
    )


def _mismatch(a: list[Event], b: list[Event]) -> str | None:
    """Why two traces are not the same program (None when they are, up to sizes)."""
    if len(a) != len(b):
        return f"the step makes {len(a)} and {len(b)} allocation events at two batch sizes"
    keys: dict[int, int] = {}
    for x, y in zip(a, b, strict=True):
        same = (x.alloc, x.op, x.phase, x.iteration) == (y.alloc, y.op, y.phase, y.iteration)
        if not same or keys.setdefault(x.key, y.key) != y.key:
            return f"the step's ops differ between batch sizes (at {x.op} vs {y.op})"
    return None


def max_micro_batch(
    spec: TrainSpec,
    margin: float = 0.0,
    limit: int = 1 << 16,
    scaling: BatchScaling | None = None,
) -> MaxBatch:
    """The largest micro-batch of `spec` whose step fits `spec.device` less `margin`.

    `margin` is the fraction of the device's memory kept free (0.1 keeps 10%).
    """
    if not 0.0 <= margin < 1.0:
        raise SpecError([f"margin must be a fraction in [0, 1), got {margin}"])
    scaling = scaling or scale_batch(spec)
    budget = int(scaling.device.memory_bytes * (1.0 - margin))
    needed: Callable[[int], int] = scaling.needed_bytes

    def fits(batch: int) -> bool:
        return scaling.fits(batch, budget)

    if not fits(1):
        return MaxBatch(
            batch=0,
            needed_bytes=needed(1),
            next_needed_bytes=None,
            budget_bytes=budget,
            exact=scaling.affine,
            device_name=scaling.device.name,
            margin=margin,
        )
    # NB: memory grows almost linearly with the batch, so the search starts where the line
    # through batches 1 and 2 meets the budget and gallops out from there to a bracket.
    slope = needed(2) - needed(1) if limit >= 2 else 0
    guess = limit if slope <= 0 else max(1, min(limit, 1 + (budget - needed(1)) // slope))
    step = max(1, guess // 64)
    if fits(guess):
        low, high = guess, guess + step
        while high <= limit and fits(high):
            low, high, step = high, high + 2 * step, 2 * step
        if high > limit:
            if fits(limit):
                return MaxBatch(
                    batch=limit,
                    needed_bytes=needed(limit),
                    next_needed_bytes=None,
                    budget_bytes=budget,
                    exact=scaling.affine,
                    device_name=scaling.device.name,
                    margin=margin,
                )
            high = limit
    else:
        low, high = guess - step, guess
        while low > 1 and not fits(low):
            high, low, step = low, low - 2 * step, 2 * step
        low = max(low, 1)  # batch 1 fits (checked above)
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return MaxBatch(
        batch=low,
        needed_bytes=needed(low),
        next_needed_bytes=needed(low + 1),
        budget_bytes=budget,
        exact=scaling.affine,
        device_name=scaling.device.name,
        margin=margin,
    )
