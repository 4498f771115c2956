"""Estimate against measurement, quantity by quantity, with the error of each.

`compare(estimate, measured)` lines up what `trainfit.estimator.step` predicted for a spec with what
`trainfit.measure.measure` saw on the device: device memory needed, peak allocated and
reserved, the model states and activations (traced totals, as the GPU runner tags them), step
time and throughput. error = estimate / measured - 1. The step time compared is the loop's (the
measured window of steps back to back, `Measured.loop_step_seconds`): the estimate models a
loop's steady period, not a step timed alone with a synchronisation after it (the synced
median, which the run reports beside it, is not compared).

`local_catalog_device(backend)` names the catalog row of the local device, so that the
estimate is made for the card the steps ran on.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainfit.errors import MeasureError
from trainfit.estimator.result import Estimate
from trainfit.hardware.catalog import DeviceKind
from trainfit.measure.backend import Backend
from trainfit.measure.steps import Measured
from trainfit.memory.allocator import round_size
from trainfit.spec import TrainSpec
from trainfit.trace.step import Category, trace_step
from trainfit.training import Phase


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One quantity, estimated and measured."""

    quantity: str
    unit: str
    """"bytes", "seconds" or "samples/s"."""
    estimated: float | None
    measured: float | None

    @property
    def error(self) -> float | None:
        """estimate / measured - 1, None when either is missing or the measurement is 0."""
        if self.estimated is None or not self.measured:
            return None
        return self.estimated / self.measured - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class NoStepModel:
    """A step time was measured but none is modelled for the device (no compute rates)."""

    device: str
    """The device's display name."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PeakPhases:
    """Where each peak is: the measured one's phase and step, the estimated one's."""

    measured: Phase
    measured_step: int
    """The measured peak's step, from 1."""
    estimated: Phase
    steady: bool
    """The estimated peak is in the steady step (not the first)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Interrupted:
    """The run was interrupted after `steps` timed steps."""

    steps: int


@dataclass(frozen=True, kw_only=True, slots=True)
class NoLoop:
    """No steps ran back to back, so no step time is compared (the synced steps' median times
    each step alone, not the loop period the estimate models)."""


ComparisonNote = NoStepModel | PeakPhases | Interrupted | NoLoop
"""What a comparison's rows do not say (words: `trainfit.report.measure`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    """An estimate beside a measurement of the same spec."""

    estimated_device: str
    measured_device: str
    rows: tuple[Row, ...]
    notes: tuple[ComparisonNote, ...]

    def row(self, quantity: str) -> Row:
        for row in self.rows:
            if row.quantity == quantity:
                return row
        raise KeyError(quantity)


def component_totals(spec: TrainSpec, workspace_bytes: int) -> dict[str, int]:
    """The traced totals a real run tags: parameters, gradients after the first backward,
    optimizer state, and what the first forward kept (allocated after it - before it), each
    rounded as the CUDA caching allocator rounds it; `workspace_bytes` per cuBLAS workspace."""
    trace = trace_step(spec)
    sizes: dict[int, int] = {}
    current = 0
    before_forward = after_forward = None
    ws_at = {w.index for w in trace.workspaces}
    totals = {"parameters": 0, "gradients": 0, "optimizer_state": 0}
    for index, event in enumerate(trace.events):
        if index in ws_at:
            current += workspace_bytes
        if event.iteration == 0 and event.phase is Phase.FORWARD and before_forward is None:
            before_forward = current
        if (
            event.iteration == 0
            and event.phase is not Phase.FORWARD
            and before_forward is not None
            and after_forward is None
        ):
            after_forward = current
        if event.alloc:
            category = trace.category(event)
            if category is Category.HOST or event.nbytes == 0:
                continue
            size = round_size(event.nbytes)
            sizes[event.key] = size
            current += size
            if category.value in totals and (
                category is not Category.GRADIENTS or event.iteration == 0
            ):
                totals[category.value] += size
        elif event.key in sizes:
            current -= sizes.pop(event.key)
    totals["activations"] = (after_forward or 0) - (before_forward or 0)
    return totals


def compare(
    estimate: Estimate, measured: Measured, totals: dict[str, int] | None = None
) -> Comparison:
    """The estimate of a spec beside its measurement; `totals` from `component_totals` adds
    the model states and activations (GPU estimates only)."""
    return Comparison(
        estimated_device=estimate.device.display,
        measured_device=measured.device_name,
        rows=tuple(_memory_rows(estimate, measured, totals) + _time_rows(estimate, measured)),
        notes=tuple(_notes(estimate, measured)),
    )


def _memory_rows(
    estimate: Estimate, measured: Measured, totals: dict[str, int] | None
) -> list[Row]:
    """Device memory needed; on a GPU the allocator's peaks; with `totals`, the components."""
    rows = [
        Row(
            quantity="device memory needed",
            unit="bytes",
            estimated=estimate.device_memory_needed_bytes,
            measured=measured.device_needed_bytes,
        )
    ]
    if measured.kind is not DeviceKind.CPU:
        rows += [
            Row(
                quantity="peak allocated",
                unit="bytes",
                estimated=estimate.peak_allocated_bytes,
                measured=measured.peak_allocated_bytes,
            ),
            Row(
                quantity="peak reserved",
                unit="bytes",
                estimated=estimate.peak_reserved_bytes,
                measured=measured.peak_reserved_bytes,
            ),
        ]
    if totals is not None:
        for quantity, value in (
            ("parameters", measured.parameter_bytes),
            ("gradients", measured.gradient_bytes),
            ("optimizer state", measured.optimizer_state_bytes),
            ("activations kept by the forward", measured.activation_bytes),
        ):
            key = "activations" if quantity.startswith("activations") else quantity
            rows.append(
                Row(
                    quantity=quantity,
                    unit="bytes",
                    estimated=totals[key.replace(" ", "_")],
                    measured=value,
                )
            )
    return rows


def _time_rows(estimate: Estimate, measured: Measured) -> list[Row]:
    """The loop's step time and the throughput at it, when a loop window ran."""
    step = estimate.step_time
    if measured.loop_step_seconds is None:
        return []
    return [
        Row(
            quantity="step time (loop)",
            unit="seconds",
            estimated=None if step is None else step.seconds,
            measured=measured.loop_step_seconds,
        ),
        Row(
            quantity="throughput",
            unit="samples/s",
            estimated=None if step is None else step.samples_per_second,
            measured=measured.samples_per_second,
        ),
    ]


def _notes(estimate: Estimate, measured: Measured) -> list[ComparisonNote]:
    """What the rows do not say: a device without a step-time model, where each peak is, an
    interrupted run."""
    notes: list[ComparisonNote] = []
    if measured.loop_step_seconds is not None and estimate.step_time is None:
        notes.append(NoStepModel(device=estimate.device.display))
    if measured.peak_phase is not None:
        notes.append(
            PeakPhases(
                measured=measured.peak_phase.phase,
                measured_step=measured.peak_phase.iteration + 1,
                estimated=estimate.peak_phase,
                steady=estimate.peak_iteration != 0,
            )
        )
    if measured.interrupted:
        notes.append(Interrupted(steps=measured.steps))
    if measured.loop is None:
        notes.append(NoLoop())
    return notes


def local_catalog_device(backend: Backend) -> str:
    """The catalog name of the device the backend runs on; MeasureError naming `--device`
    when it has no catalog row."""
    if backend.kind == DeviceKind.CPU:
        return "cpu"
    from trainfit.hardware.detect import detect_local, match_catalog
    from trainfit.hardware.detect_words import matching_text

    if backend.kind == DeviceKind.CUDA:
        name, matching = match_catalog(backend.name(), "cuda", backend.total_memory())
        note = matching_text(matching)
    else:
        mps = detect_local().mps
        name, note = (
            (None, "no Apple GPU found")
            if mps is None
            else (mps.catalog_match, matching_text(mps.matching))
        )
    if name is None:
        raise MeasureError(
            f"{backend.name()} is not in the device catalog ({note}): pass --device with the "
            "closest row (`trainfit devices`) or a user catalog (--catalog) to compare"
        )
    return name
