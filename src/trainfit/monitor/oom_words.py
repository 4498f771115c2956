"""The monitor's out-of-memory report in words (`trainfit.monitor.oom`): the paragraph its
console and TensorBoard sinks write, the next rung of the low-memory ladder and its notes; and
the monitor's own notes (`trainfit.monitor.notes`)."""

from __future__ import annotations

from trainfit.hardware.units import gib
from trainfit.monitor.notes import (
    CounterOff,
    CsvColumnsDropped,
    MonitorNote,
    NvmlFailed,
    NvmlMissing,
    NvmlNoMatch,
    OomMemoryUnread,
    OomReportFailed,
    SamplerStopped,
    SinkCloseFailed,
)
from trainfit.monitor.oom import (
    AllTaken,
    EstimateFailed,
    LadderMove,
    NextRung,
    NoRungFits,
    NoRungSaves,
    OomReport,
    PassedOver,
    RungAdvice,
    RungFailed,
    RungNote,
)
from trainfit.monitor.phase import StepPhase
from trainfit.plan.options import Change

LAST_RESORT = (
    "every rung of the ladder is taken: shard the model over GPUs (FSDP, DeepSpeed ZeRO), "
    "offload optimizer state to the CPU, freeze layers or use LoRA, or a larger device"
)

_ADVICE = {
    Change.MIXED_PRECISION: (
        "mixed precision: run the forward and the loss under torch.autocast with bfloat16 "
        "(float16 with a GradScaler on GPUs older than Ampere)"
    ),
    Change.CHECKPOINTING: (
        "gradient checkpointing (model.gradient_checkpointing_enable() on a Hugging Face "
        "model, torch.utils.checkpoint around your blocks)"
    ),
    Change.MICRO_BATCH_ONE: "micro-batch 1 with accumulation (same effective batch)",
}

_WHERE = {
    StepPhase.FORWARD: "in the forward pass",
    StepPhase.LOSS: "after the model's forward (the loss, or the start of its backward)",
    StepPhase.BACKWARD: "in the backward pass",
    StepPhase.OPTIMIZER: "in the optimizer step",
    StepPhase.DATA: "outside forward, backward and the optimizer step (data, or an "
    "optimizer the monitor was not given)",
}


def move_text(move: LadderMove) -> str:
    """The next move down the ladder, in words."""
    if isinstance(move, AllTaken):
        return LAST_RESORT
    if isinstance(move, RungAdvice):
        return _advice(move)
    change = move.change
    if change is Change.MIXED_PRECISION:
        assert move.precision is not None
        return f"{move.precision.value} mixed precision"
    if change is Change.QUARTER_MICRO_BATCH:
        return (
            f"micro-batch {move.micro_batch} with {move.grad_accum} accumulation steps "
            f"(effective batch {move.effective_batch})"
        )
    if change is Change.MICRO_BATCH_ONE:
        return f"micro-batch 1 with {move.grad_accum} accumulation steps"
    return {
        Change.CHECKPOINTING: "gradient checkpointing",
        Change.EIGHT_BIT_ADAMW: "8-bit AdamW state",
    }[change]


def _advice(advice: RungAdvice) -> str:
    if advice.change is Change.QUARTER_MICRO_BATCH:
        if advice.micro_batch is None:
            return "a smaller micro-batch with more gradient accumulation (same effective batch)"
        return (
            f"micro-batch {advice.micro_batch} with {advice.grad_accum} accumulation steps "
            f"instead of {advice.seen_micro_batch} with {advice.seen_accumulation} (same "
            "effective batch)"
        )
    if advice.change is Change.EIGHT_BIT_ADAMW:
        if advice.instead_of is None:
            return f"8-bit AdamW state ({advice.optimizer_path}), if you train with Adam(W)"
        return f"8-bit AdamW state ({advice.optimizer_path} instead of {advice.instead_of})"
    return _ADVICE[advice.change]


def rung_note_text(note: RungNote) -> str:
    """Why a next rung has no figures, or what else to know, in words."""
    if isinstance(note, PassedOver):
        return "passed over: " + ", ".join(
            f"{s.change.value} ({s.error})"
            if isinstance(s, RungFailed)
            else f"{move_text(s.change)} (predicted to save nothing)"
            for s in note.skipped
        )
    if isinstance(note, EstimateFailed):
        return f"no figures: estimating the spec failed ({note.error})"
    if isinstance(note, NoRungSaves):
        return f"no rung saves memory; {LAST_RESORT}"
    if isinstance(note, NoRungFits):
        return f"no rung of the ladder fits: {LAST_RESORT}"
    return "pass spec= to the monitor for predicted figures"


def _and(items: tuple[str, ...]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def rung_text(rung: NextRung) -> str:
    """The next rung of the low-memory ladder, with its figures, in one sentence."""
    note = "" if rung.note is None else rung_note_text(rung.note)
    if rung.needed_bytes is None or rung.current_needed_bytes is None:
        text = f"Next rung of the low-memory ladder: {move_text(rung.change)}"
        return text + (f" ({note})." if note else ".")
    saved = rung.saved_bytes or 0
    delta = f"saves {gib(saved)}" if saved >= 0 else f"costs {gib(-saved)} more"
    verdict = {True: "fits", False: "does not fit", None: "may or may not fit"}[rung.fits]
    text = (
        f"Next rung of the low-memory ladder: {move_text(rung.change)}, predicted "
        f"{gib(rung.needed_bytes)} instead of {gib(rung.current_needed_bytes)} ({delta}), which "
        f"{verdict} the {rung.device}"
    )
    if rung.then and rung.then_needed_bytes is not None:
        then = _and(tuple(move_text(c) for c in rung.then))
        text += f"; with {then} as well: predicted {gib(rung.then_needed_bytes)}, which fits"
    return text + (f"; {note}." if note else ".")


def _where(report: OomReport) -> str:
    what = _WHERE[report.phase]
    if report.module is None:
        return what
    kind = report.module_type
    named = f" ({kind})" if kind and kind != report.module else ""
    prep = "at" if report.phase is StepPhase.BACKWARD else "in"
    return f"{what}, {prep} module {report.module}{named}"


def oom_text(report: OomReport) -> str:
    """The report in one paragraph: where, how full, and the next rung."""
    parts = [f"Out of memory at step {report.step}, {_where(report)}"]
    figures = []
    if report.requested_bytes is not None:
        figures.append(f"asking for {gib(report.requested_bytes)}")
    if report.allocated_bytes is not None:
        figures.append(f"{gib(report.allocated_bytes)} allocated")
    if report.reserved_bytes is not None:
        figures.append(f"{gib(report.reserved_bytes)} reserved")
    if report.peak_allocated_bytes is not None:
        figures.append(f"peak {gib(report.peak_allocated_bytes)} this step")
    if figures:
        parts.append(": " + ", ".join(figures))
        if report.total_bytes is not None:
            parts.append(f" of {gib(report.total_bytes)}")
    return "".join(parts) + ". " + rung_text(report.next_rung)


_NO_COUNTERS = "no utilisation, power or temperature"


def monitor_note_text(note: MonitorNote) -> str:
    """A monitor note as the console writes it (after "trainfit: note: ")."""
    match note:
        case NvmlMissing():
            return f"NVML not available (pip install nvidia-ml-py): {_NO_COUNTERS}"
        case NvmlFailed(error=error):
            return f"NVML failed ({error}): {_NO_COUNTERS}"
        case NvmlNoMatch(device=device):
            return (
                f"NVML failed (no NVML device matches {device} (its UUID is unknown to NVML, and "
                f"with CUDA_VISIBLE_DEVICES set the index would name another GPU)): {_NO_COUNTERS}"
            )
        case CounterOff(counter=counter, error=error):
            return f"NVML {counter} unavailable ({error})"
        case SinkCloseFailed(sink=sink, error=error):
            return f"closing {sink} failed: {error}"
        case SamplerStopped(error=error):
            return f"the sampler thread stopped: {error}"
        case CsvColumnsDropped(columns=columns):
            return (
                f"CSV columns are fixed at the first record: {', '.join(columns)} not written there"
            )
        case OomReportFailed(error=error):
            return f"the out-of-memory report failed: {error}"
        case OomMemoryUnread(error=error):
            return f"reading memory after the out-of-memory error failed: {error}"
