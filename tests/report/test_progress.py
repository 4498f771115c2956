"""The progress line's words."""

from __future__ import annotations

from trainfit.progress import Event, Part
from trainfit.report.progress import progress_text


def test_a_trace_alone_names_its_model_by_its_last_part() -> None:
    event = Event(part=Part.TRACE, name="/data/models/tinyllama/", batch=4)
    assert progress_text([event]) == "tracing tinyllama at batch 4"
    factory = Event(part=Part.TRACE, name="trainfit.models.zoo:emotion_mlp", batch=1)
    assert progress_text([factory]) == "tracing emotion_mlp at batch 1"


def test_the_parts_under_way_outermost_first() -> None:
    events = [
        Event(part=Part.MODEL, name="small", index=1, total=3),
        Event(part=Part.STAGE, name="stage1", index=2, total=2),
        Event(part=Part.DEVICE, name="h100", index=2, total=10),
        Event(part=Part.RUNG, name="bf16+checkpointing+adamw", index=2, total=3),
        Event(part=Part.TRACE, name="gpt2", batch=4),
    ]
    assert progress_text(events) == (
        "model small 1/3 · stage stage1 2/2 · h100 (device 2/10) · "
        "bf16+checkpointing+adamw (setting 2/3) · tracing at batch 4"
    )


def test_uncounted_parts_and_the_report() -> None:
    events = [Event(part=Part.DEVICE, name="h100"), Event(part=Part.RUNG, name="fp32")]
    assert progress_text(events) == "h100 · fp32"
    assert progress_text([Event(part=Part.REPORT, name="plots")]) == "report: plots"
