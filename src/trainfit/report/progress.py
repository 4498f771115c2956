"""The words of a progress display: the parts of a computation under way as one line.

`progress_text` renders the events in effect (`trainfit.progress`), outermost first, e.g.
`model small 1/3 · h100 (device 2/10) · bf16+checkpointing+adamw (setting 1/3) · tracing
batch 4`.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainfit.progress import Activity, Event, Part


def _count(event: Event) -> str:
    if event.index is None:
        return ""
    return f" {event.index}/{event.total}" if event.total is not None else f" {event.index}"


def _short(model: str) -> str:
    """A model's name without a long path: its last component."""
    return model.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1] or model


def _measure_text(event: Event) -> str:
    """A real run's part in words (`trainfit.progress.Activity`)."""
    count = _count(event)
    batch = event.batch
    return {
        Activity.IMPORT: "loading PyTorch",
        Activity.ESTIMATE: "estimating the step",
        Activity.PREDICT: "predicting the largest micro-batch",
        Activity.BUILD: "building the model on the device",
        Activity.WARMUP: f"warm-up step{count}",
        Activity.STEP: f"step{count}",
        Activity.LOOP: f"timing {event.total or 'the'} steps back to back",
        Activity.ATTEMPT: f"trying micro-batch {batch}",
        Activity.EVALUATE: f"evaluating at batch {batch}",
        Activity.LATENCY: f"timing forwards at batch {batch}",
    }[Activity(event.name)]


def event_text(event: Event, alone: bool) -> str:
    """One part's words; `alone`: no outer part is shown (a trace then names its model)."""
    count = _count(event)
    if event.part is Part.MODEL:
        return f"model {_short(event.name)}{count}"
    if event.part is Part.STAGE:
        return f"stage {event.name}{count}"
    if event.part is Part.DEVICE:
        return f"{event.name} (device{count})" if count else event.name
    if event.part is Part.RUNG:
        return f"{event.name} (setting{count})" if count else event.name
    if event.part is Part.MEASURE:
        return _measure_text(event)
    if event.part is Part.TRACE:
        what = f"tracing {_short(event.name)}" if alone else "tracing"
        return f"{what} at batch {event.batch}" if event.batch is not None else what
    return f"report: {event.name}"


def progress_text(events: Sequence[Event]) -> str:
    """The parts under way, outermost first, as one line."""
    return " · ".join(event_text(e, alone=len(events) == 1) for e in events)
