"""What `trainfit measure` prints of a run: the loop's step time as the headline, each step
alone beside it."""

from __future__ import annotations

from rich.console import Console

from trainfit.hardware.catalog import DeviceKind
from trainfit.hardware.units import GIB
from trainfit.measure.compare import (
    Comparison,
    Interrupted,
    NoLoop,
    NoStepModel,
    PeakPhases,
    Row,
)
from trainfit.measure.max_batch import (
    Agreed,
    Attempt,
    EvalShort,
    Leaked,
    NoDivisor,
    PastRam,
    Raised,
    SearchInterrupted,
)
from trainfit.measure.steps import Measured
from trainfit.measure.window import LoopWindow
from trainfit.report.measure import (
    attempt_dict,
    comparison_dict,
    comparison_note_text,
    loop_line,
    max_batch_note_text,
    measured_renderable,
)
from trainfit.training import Phase


def _measured(loop: LoopWindow | None, interrupted: bool = False) -> Measured:
    return Measured(
        device_name="Test CPU", kind=DeviceKind.CPU, warmup=1, steps=3, interrupted=interrupted,
        micro_batch=4, grad_accum=2, tokens_per_sample=None, peak_allocated_bytes=None,
        peak_reserved_bytes=None, peak_used_bytes=1 << 20, device_needed_bytes=1 << 20,
        used_method="resident set", baseline_used_bytes=0, total_memory_bytes=None,
        free_at_start_bytes=None, free_at_end_bytes=None, parameter_bytes=1, gradient_bytes=1,
        optimizer_state_bytes=2, activation_bytes=None, phases=(),
        step_seconds=(0.012, 0.010, 0.011), loop=loop,
    )  # fmt: skip


def _text(m: Measured) -> str:
    console = Console(record=True, width=200)
    console.print(measured_renderable(m, None))
    return console.export_text()


def test_the_headline_is_the_loop_and_each_step_alone_is_beside_it():
    text = _text(_measured(LoopWindow(steps=3, seconds=0.024)))
    assert "1 warm-up + 3 timed steps, then 3 back to back\n" in text
    assert "step 8.0 ms in a loop (3 steps back to back), 1000.0 samples/s\n" in text
    assert "each step alone, synchronised: 11.0 ms median (10.0 to 12.0)\n" in text


def test_without_a_window_only_the_synced_steps_are_shown():
    text = _text(_measured(None, interrupted=True))
    assert "1 warm-up + 3 timed steps (interrupted)\n" in text
    assert "in a loop" not in text and "samples/s" not in text
    assert "each step alone, synchronised: 11.0 ms median" in text


def test_the_loop_window_is_one_line_when_it_completes():
    assert loop_line(LoopWindow(steps=10, seconds=0.25)) == (
        "10 steps back to back: 250 ms, 25 ms per step"
    )


def test_each_note_of_a_comparison_in_words() -> None:
    assert comparison_note_text(NoStepModel(device="NVIDIA T4")) == (
        "no step time is modelled for NVIDIA T4 (its compute rates are not in the catalog)"
    )
    peak = PeakPhases(
        measured=Phase.BACKWARD, measured_step=2, estimated=Phase.OPTIMIZER, steady=True
    )
    assert comparison_note_text(peak) == (
        "measured peak in the backward phase of step 2; estimated in the optimizer phase of "
        "the steady step"
    )
    first = PeakPhases(
        measured=Phase.FORWARD, measured_step=1, estimated=Phase.FORWARD, steady=False
    )
    assert comparison_note_text(first).endswith("estimated in the forward phase of the first step")
    assert comparison_note_text(Interrupted(steps=3)) == "interrupted: 3 timed steps completed"
    assert comparison_note_text(NoLoop()).startswith(
        "no steps ran back to back, so no step time is compared:"
    )


def test_a_comparison_as_json_has_its_notes_in_words() -> None:
    row = Row(quantity="peak allocated", unit="bytes", estimated=110.0, measured=100.0)
    comparison = Comparison(
        estimated_device="NVIDIA T4",
        measured_device="Tesla T4",
        rows=(row,),
        notes=(Interrupted(steps=3),),
    )
    data = comparison_dict(comparison)
    assert data["notes"] == ["interrupted: 3 timed steps completed"]
    assert data["rows"] == [
        {
            "quantity": "peak allocated",
            "unit": "bytes",
            "estimated": 110.0,
            "measured": 100.0,
            "error": row.error,
        }
    ]


def _attempt(failure: Raised | PastRam | None) -> Attempt:
    return Attempt(micro_batch=12, eval_batch=None, fits=failure is None, eval_fits=None,
                   failed_phase=None if failure is None else "forward", failure=failure,
                   peak_reserved_bytes=4096, peak_used_bytes=None, left_allocated_bytes=512,
                   seconds=1.25)  # fmt: skip


def test_what_stopped_an_attempt_in_json() -> None:
    oom = Raised(line="OutOfMemoryError: CUDA out of memory. Tried", out_of_memory=True)
    broken = Raised(line="ValueError: bad shape (at model.py:3)", out_of_memory=False)
    past = PastRam(grew_bytes=11 * GIB, available_bytes=10 * GIB)
    picked = [
        {k: attempt_dict(_attempt(f))[k] for k in ("message", "error")}
        for f in (None, oom, broken, past)
    ]
    assert picked == [
        {"message": None, "error": None},
        {"message": "OutOfMemoryError: CUDA out of memory. Tried", "error": None},
        {"message": "ValueError: bad shape (at model.py:3)",
         "error": "ValueError: bad shape (at model.py:3)"},
        {"message": "the process grew by 11.00 GiB, past the 10.00 GiB of RAM available at "
         "the start", "error": None},
    ]  # fmt: skip
    assert list(attempt_dict(_attempt(None))) == [
        "micro_batch", "eval_batch", "fits", "eval_fits", "failed_phase", "message", "error",
        "peak_reserved_bytes", "peak_used_bytes", "left_allocated_bytes", "seconds",
    ]  # fmt: skip


def test_each_note_of_a_max_batch_search_in_words() -> None:
    assert max_batch_note_text(SearchInterrupted()) == (
        "interrupted: the answer lies between the bounds reached"
    )
    assert max_batch_note_text(Leaked(nbytes=512)) == (
        "512 bytes more were left allocated after the last attempt than the first one"
    )
    assert max_batch_note_text(Agreed(world_size=2, rank=0)) == (
        "agreed over 2 ranks (rank 0 reporting)"
    )
    assert max_batch_note_text(EvalShort(eval_batch=37, trained=37, largest=30)) == (
        "evaluation at batch 37 ran out of memory after training at 37: the largest "
        "evaluation batch that runs there is 30"
    )
    assert max_batch_note_text(NoDivisor(per_rank=13, chosen=1, micro=8, better=16)) == (
        "13 samples per rank have no divisor between 1 and 8: an effective batch of 16 would "
        "run micro-batches of 8"
    )
