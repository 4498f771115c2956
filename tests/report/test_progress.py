"""The progress line's words."""

from __future__ import annotations

from trainfit.progress import Activity, Event, Part
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


def test_a_real_runs_parts_in_words() -> None:
    def words(name: Activity, **counts: int) -> str:
        return progress_text([Event(part=Part.MEASURE, name=name.value, **counts)])

    assert words(Activity.BUILD) == "building the model on the device"
    assert words(Activity.WARMUP, index=1, total=13) == "warm-up step 1/13"
    assert words(Activity.STEP, index=4, total=13) == "step 4/13"
    assert words(Activity.LOOP, total=10) == "timing 10 steps back to back"
    assert words(Activity.ATTEMPT, batch=64) == "trying micro-batch 64"
    assert words(Activity.LATENCY, batch=8) == "timing forwards at batch 8"
    estimating = [Event(part=Part.MEASURE, name=Activity.ESTIMATE.value),
                  Event(part=Part.TRACE, name="gpt2", batch=8)]  # fmt: skip
    assert progress_text(estimating) == "estimating the step · tracing at batch 8"


def test_every_activity_has_words() -> None:
    for activity in Activity:
        text = progress_text([Event(part=Part.MEASURE, name=activity.value, batch=2)])
        assert text and "_" not in text and "None" not in text
