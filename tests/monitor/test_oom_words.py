"""The monitor's out-of-memory report in words (exact strings): each move down the ladder,
each note, and the paragraph."""

from __future__ import annotations

from trainfit.hardware.units import GIB
from trainfit.monitor.oom import (
    AllTaken,
    EstimateFailed,
    NextRung,
    NoRungFits,
    NoRungSaves,
    NoSpec,
    OomReport,
    PassedOver,
    RungAdvice,
    RungChange,
    RungFailed,
    SavesNothing,
)
from trainfit.monitor.oom_words import LAST_RESORT, move_text, oom_text, rung_note_text
from trainfit.monitor.phase import StepPhase
from trainfit.plan.options import Change
from trainfit.spec import Precision


def test_each_move_on_a_spec_in_words() -> None:
    assert [
        move_text(m)
        for m in (
            RungChange(change=Change.MIXED_PRECISION, precision=Precision.FP16),
            RungChange(
                change=Change.QUARTER_MICRO_BATCH, micro_batch=4, grad_accum=8, effective_batch=32
            ),
            RungChange(change=Change.CHECKPOINTING),
            RungChange(change=Change.EIGHT_BIT_ADAMW),
            RungChange(change=Change.MICRO_BATCH_ONE, micro_batch=1, grad_accum=32),
            AllTaken(),
        )
    ] == [
        "fp16 mixed precision",
        "micro-batch 4 with 8 accumulation steps (effective batch 32)",
        "gradient checkpointing",
        "8-bit AdamW state",
        "micro-batch 1 with 32 accumulation steps",
        LAST_RESORT,
    ]


def test_each_move_from_what_the_monitor_saw_in_words() -> None:
    quarter = RungAdvice(
        change=Change.QUARTER_MICRO_BATCH,
        micro_batch=2,
        grad_accum=4,
        seen_micro_batch=8,
        seen_accumulation=1,
    )
    eight_bit = RungAdvice(change=Change.EIGHT_BIT_ADAMW, optimizer_path="bnb.AdamW8bit")
    assert move_text(quarter) == (
        "micro-batch 2 with 4 accumulation steps instead of 8 with 1 (same effective batch)"
    )
    assert move_text(RungAdvice(change=Change.QUARTER_MICRO_BATCH)) == (
        "a smaller micro-batch with more gradient accumulation (same effective batch)"
    )
    assert move_text(eight_bit) == "8-bit AdamW state (bnb.AdamW8bit), if you train with Adam(W)"
    instead = RungAdvice(
        change=Change.EIGHT_BIT_ADAMW, optimizer_path="bnb.AdamW8bit", instead_of="AdamW"
    )
    assert move_text(instead) == "8-bit AdamW state (bnb.AdamW8bit instead of AdamW)"
    assert move_text(RungAdvice(change=Change.MICRO_BATCH_ONE)) == (
        "micro-batch 1 with accumulation (same effective batch)"
    )


def test_each_rung_note_in_words() -> None:
    skipped = PassedOver(
        skipped=(
            RungFailed(change=Change.CHECKPOINTING, error="no blocks to checkpoint"),
            SavesNothing(
                change=RungChange(change=Change.MIXED_PRECISION, precision=Precision.BF16)
            ),
        )
    )
    assert rung_note_text(skipped) == (
        "passed over: gradient checkpointing (no blocks to checkpoint), bf16 mixed precision "
        "(predicted to save nothing)"
    )
    assert rung_note_text(EstimateFailed(error="unknown model")) == (
        "no figures: estimating the spec failed (unknown model)"
    )
    assert rung_note_text(NoRungSaves()) == f"no rung saves memory; {LAST_RESORT}"
    assert rung_note_text(NoRungFits()) == f"no rung of the ladder fits: {LAST_RESORT}"
    assert rung_note_text(NoSpec()) == "pass spec= to the monitor for predicted figures"


def test_the_paragraph_with_figures_and_a_rung_that_costs_more() -> None:
    rung = NextRung(
        change=RungChange(change=Change.CHECKPOINTING),
        needed_bytes=6 * GIB,
        current_needed_bytes=5 * GIB,
        fits=None,
        device="GPU X",
        note=NoRungSaves(),
    )
    report = OomReport(
        step=2,
        phase=StepPhase.LOSS,
        module="head",
        module_type="Linear",
        allocated_bytes=GIB,
        reserved_bytes=None,
        peak_allocated_bytes=None,
        total_bytes=8 * GIB,
        requested_bytes=None,
        next_rung=rung,
        error="CUDA out of memory.",
    )
    assert oom_text(report) == (
        "Out of memory at step 2, after the model's forward (the loss, or the start of its "
        "backward), in module head (Linear): 1.00 GiB allocated of 8.00 GiB. Next rung of the "
        "low-memory ladder: gradient checkpointing, predicted 6.00 GiB instead of 5.00 GiB "
        f"(costs 1.00 GiB more), which may or may not fit the GPU X; no rung saves memory; "
        f"{LAST_RESORT}."
    )
