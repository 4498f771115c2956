"""The progress protocol: events reach the reporter in effect, and only it."""

from __future__ import annotations

from trainfit import estimate
from trainfit.plan.search import plan
from trainfit.progress import Event, Part, reporting, tell
from trainfit.spec import TrainSpec


def test_tell_without_a_reporter_reaches_no_one() -> None:
    earlier: list[Event] = []
    with reporting(earlier.append):
        pass
    assert tell(Part.DEVICE, "h100", index=1, total=2) is None
    with reporting(None):  # NB: None with none in effect puts none in effect either
        tell(Part.DEVICE, "t4")
    assert earlier == []


def test_reporting_is_for_the_block_only() -> None:
    outer: list[Event] = []
    inner: list[Event] = []
    with reporting(outer.append):
        tell(Part.MODEL, "a", index=1, total=2)
        with reporting(inner.append):
            tell(Part.DEVICE, "h100")
        with reporting(None):  # NB: None keeps the reporter in effect
            tell(Part.DEVICE, "t4")
    tell(Part.DEVICE, "l4")
    assert outer == [
        Event(part=Part.MODEL, name="a", index=1, total=2),
        Event(part=Part.DEVICE, name="t4"),
    ]
    assert inner == [Event(part=Part.DEVICE, name="h100")]


def test_an_estimate_tells_its_trace() -> None:
    events: list[Event] = []
    with reporting(events.append):
        estimate(TrainSpec(model="trainfit.models.zoo:emotion_mlp", batch=8))
    assert events == [Event(part=Part.TRACE, name="trainfit.models.zoo:emotion_mlp", batch=8)]


def test_a_plan_tells_each_device_rung_and_trace() -> None:
    events: list[Event] = []
    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    plan(spec, effective_batch=8, devices=("h100", "t4"), progress=events.append)
    devices = [(e.name, e.index, e.total) for e in events if e.part is Part.DEVICE]
    # NB: each device in turn, then the ladder's device again for the ladder's rungs
    assert devices == [("h100", 1, 2), ("t4", 2, 2), ("h100", None, None)]
    rungs = [(e.name, e.index, e.total) for e in events if e.part is Part.RUNG]
    # NB: the first setting fits each GPU; the ladder starts from fp32 at the whole batch
    assert rungs == [
        ("bf16+adamw", 1, 3),
        ("fp16+adamw", 1, 3),
        ("fp32", 1, 6),
        ("mixed precision", 2, 6),
        ("quarter micro-batch", 3, 6),
        ("gradient checkpointing", 4, 6),
        ("8-bit AdamW", 5, 6),
        ("micro-batch 1", 6, 6),
    ]
    first = events.index(Event(part=Part.DEVICE, name="h100", index=1, total=2))
    assert events[first + 2] == Event(part=Part.TRACE, name=spec.model, batch=1)
