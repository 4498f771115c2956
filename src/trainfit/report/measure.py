"""Render what `trainfit measure` measured: steps beside the estimate, the real largest
micro-batch, and the latency table; and, before and during a run, its forecast and each step."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainfit.hardware.units import GIB
from trainfit.measure.compare import (
    Comparison,
    ComparisonNote,
    Interrupted,
    NoStepModel,
    PeakPhases,
    Row,
)
from trainfit.measure.forecast import LONG_RUN_SECONDS, Forecast
from trainfit.measure.latency import LatencyTable
from trainfit.measure.max_batch import (
    Agreed,
    Attempt,
    AttemptFailure,
    EvalShort,
    Leaked,
    MaxBatchNote,
    NoDivisor,
    Raised,
    RealMaxBatch,
)
from trainfit.measure.steps import Measured, StepDone
from trainfit.measure.window import FILLING_STEPS, LoopWindow
from trainfit.plan.time_words import no_time_text, slow_half_text
from trainfit.report.tables import FitTable


def comparison_note_text(note: ComparisonNote) -> str:
    """What a comparison's rows do not say, in words."""
    if isinstance(note, NoStepModel):
        return (
            f"no step time is modelled for {note.device} (its compute rates are not in the catalog)"
        )
    if isinstance(note, PeakPhases):
        return (
            f"measured peak in the {note.measured.value} phase of step {note.measured_step}; "
            f"estimated in the {note.estimated.value} phase of the "
            f"{'steady' if note.steady else 'first'} step"
        )
    if isinstance(note, Interrupted):
        return f"interrupted: {note.steps} timed steps completed"
    return (
        "no steps ran back to back, so no step time is compared: the synced steps' median "
        "times each step alone, not the loop period the estimate models"
    )


def comparison_dict(comparison: Comparison) -> dict[str, object]:
    """An estimate beside its measurement as JSON, the notes in words."""
    return {
        "estimated_device": comparison.estimated_device,
        "measured_device": comparison.measured_device,
        "rows": [
            {
                "quantity": r.quantity,
                "unit": r.unit,
                "estimated": r.estimated,
                "measured": r.measured,
                "error": r.error,
            }
            for r in comparison.rows
        ],
        "notes": [comparison_note_text(n) for n in comparison.notes],
    }


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / GIB:.3f} GiB"
    if unit == "seconds":
        return f"{value * 1e3:.1f} ms"
    return f"{value:.1f} {unit}"


def _error(row: Row) -> str:
    return "-" if row.error is None else f"{row.error:+.1%}"


def measured_renderable(measured: Measured, comparison: Comparison | None) -> Group:
    """The run's headline, then estimate against measured per quantity (or the measurement)."""
    head = Text()
    head.append(f"{measured.device_name}\n", style="bold")
    loop = measured.loop
    head.append(
        f"micro-batch {measured.micro_batch} x {measured.grad_accum} accumulation; "
        f"{measured.warmup} warm-up + {measured.steps} timed steps"
        + ("" if loop is None else f", then {loop.steps} back to back")
        + (" (interrupted)" if measured.interrupted else "")
        + "\n"
    )
    head.append(_step_text(measured))
    head.append(f"device memory needed: {measured.device_needed_bytes / GIB:.3f} GiB")
    if measured.total_memory_bytes:
        share = measured.device_needed_bytes / measured.total_memory_bytes
        head.append(f" ({share:.0%} of {measured.total_memory_bytes / GIB:.2f} GiB)")
    head.append(f"\nmemory in use measured by: {measured.used_method}")
    parts: list[object] = [head]
    if comparison is not None:
        title = f"estimated for {comparison.estimated_device} against measured"
        table = FitTable(title=title, title_justify="left")
        for column, justify in (
            ("quantity", "left"),
            ("estimated", "right"),
            ("measured", "right"),
            ("error", "right"),
        ):
            table.add_column(column, justify=justify)
        for row in comparison.rows:
            table.add_row(
                row.quantity,
                _value(row.estimated, row.unit),
                _value(row.measured, row.unit),
                _error(row),
            )
        parts.append(table)
        parts += [Text(f"- {comparison_note_text(note)}", style="dim") for note in comparison.notes]
    else:
        table = FitTable(title="measured", title_justify="left")
        table.add_column("quantity")
        table.add_column("measured", justify="right")
        for quantity, value in (
            ("peak allocated", measured.peak_allocated_bytes),
            ("peak reserved", measured.peak_reserved_bytes),
            ("parameters", measured.parameter_bytes),
            ("gradients", measured.gradient_bytes),
            ("optimizer state", measured.optimizer_state_bytes),
            ("activations kept by the forward", measured.activation_bytes),
        ):
            table.add_row(quantity, _value(value, "bytes"))
        parts.append(table)
    return Group(*parts)


def _step_text(measured: Measured) -> str:
    """The loop's step time and throughput, then each step alone (synchronised)."""
    out = ""
    loop = measured.loop
    if loop is not None:
        rate = measured.samples_per_second or 0.0
        tokens = measured.tokens_per_second
        out += (
            f"step {loop.step_seconds * 1e3:.1f} ms in a loop ({loop.steps} steps back to back), "
            f"{rate:.1f} samples/s" + (f", {tokens:,.0f} tokens/s" if tokens else "") + "\n"
        )
    median, spread = measured.median_step_seconds, measured.step_spread_seconds
    if median is not None and spread is not None:
        out += (
            f"each step alone, synchronised: {median * 1e3:.1f} ms median "
            f"({spread[0] * 1e3:.1f} to {spread[1] * 1e3:.1f})\n"
        )
    return out


def max_batch_note_text(note: MaxBatchNote) -> str:
    """What a max-batch search's figures do not say, in words."""
    if isinstance(note, Leaked):
        return (
            f"{note.nbytes} bytes more were left allocated after the last attempt than the "
            "first one"
        )
    if isinstance(note, Agreed):
        return f"agreed over {note.world_size} ranks (rank {note.rank} reporting)"
    if isinstance(note, EvalShort):
        return (
            f"evaluation at batch {note.eval_batch} ran out of memory after training "
            f"at {note.trained}: the largest evaluation batch that runs there is {note.largest}"
        )
    if isinstance(note, NoDivisor):
        return (
            f"{note.per_rank} samples per rank have no divisor between {note.chosen} and "
            f"{note.micro}: an effective batch of {note.better} would run micro-batches of "
            f"{note.micro}"
        )
    return "interrupted: the answer lies between the bounds reached"


def attempt_failure_text(failure: AttemptFailure) -> str:
    """What stopped an attempt, in words (a raised error's own line as it is)."""
    if isinstance(failure, Raised):
        return failure.line
    return (
        f"the process grew by {failure.grew_bytes / GIB:.2f} GiB, past the "
        f"{failure.available_bytes / GIB:.2f} GiB of RAM available at the start"
    )


def attempt_dict(attempt: Attempt) -> dict[str, object]:
    """One attempt of a max-batch search as JSON, what stopped it in words."""
    failure = attempt.failure
    return {
        "micro_batch": attempt.micro_batch,
        "eval_batch": attempt.eval_batch,
        "fits": attempt.fits,
        "eval_fits": attempt.eval_fits,
        "failed_phase": attempt.failed_phase,
        "message": None if failure is None else attempt_failure_text(failure),
        "error": (
            failure.line if isinstance(failure, Raised) and not failure.out_of_memory else None
        ),
        "peak_reserved_bytes": attempt.peak_reserved_bytes,
        "peak_used_bytes": attempt.peak_used_bytes,
        "left_allocated_bytes": attempt.left_allocated_bytes,
        "seconds": attempt.seconds,
    }


def max_batch_dict(found: RealMaxBatch) -> dict[str, object]:
    """A max-batch search as JSON, its notes in words."""
    return {
        "device": found.device_name,
        "max_micro_batch": found.micro_batch,
        "first_failing": found.first_failing,
        "limit": found.limit,
        "predicted": found.predicted,
        "max_eval_batch": found.max_eval_batch,
        "effective_batch": found.effective_batch,
        "micro_batch": found.chosen_micro_batch,
        "grad_accum": found.grad_accum,
        "world_size": found.world_size,
        "leaked_bytes": found.leaked_bytes,
        "attempts": [attempt_dict(a) for a in found.attempts],
        "notes": [max_batch_note_text(n) for n in found.notes],
        "interrupted": found.interrupted,
    }


def max_batch_renderable(found: RealMaxBatch) -> Group:
    """The real largest micro-batch, what the estimator said, and each attempt."""
    head = Text()
    head.append(f"{found.device_name}: ", style="bold")
    if found.interrupted:
        failing = (
            f", {found.first_failing} ran out of memory" if found.first_failing is not None else ""
        )
        head.append(f"interrupted: at least {found.micro_batch} fits{failing}", style="bold yellow")
    elif found.micro_batch == 0:
        head.append("not even one sample trains here", style="bold red")
    else:
        above = (
            f" ({found.first_failing} ran out of memory)"
            if found.first_failing is not None
            else f" (the search stopped at its limit, {found.limit})"
        )
        head.append(f"largest micro-batch {found.micro_batch}{above}", style="bold")
    if found.predicted is not None:
        head.append(f"\npredicted by trainfit for this card: {found.predicted}")
        if found.micro_batch:
            head.append(f" ({found.predicted / found.micro_batch - 1:+.1%})")
    if found.max_eval_batch is not None:
        head.append(f"\nlargest evaluation batch after training: {found.max_eval_batch}")
    if found.chosen_micro_batch is not None:
        ranks = f" per rank over {found.world_size} ranks" if found.world_size > 1 else ""
        head.append(
            f"\nfor an effective batch of {found.effective_batch}: micro-batch "
            f"{found.chosen_micro_batch} x {found.grad_accum} accumulation{ranks}"
        )
    table = FitTable(title="attempts", title_justify="left")
    for column in ("micro-batch", "training", "evaluation", "peak reserved", "seconds"):
        table.add_column(column, justify="right")
    for a in found.attempts:
        training = "ok" if a.fits else f"out of memory ({a.failed_phase})"
        evaluation = (
            "-"
            if a.eval_fits is None
            else ("ok" if a.eval_fits else "out of memory") + f" at {a.eval_batch}"
        )
        table.add_row(
            str(a.micro_batch),
            training,
            evaluation,
            _value(a.peak_reserved_bytes, "bytes"),
            f"{a.seconds:.1f}",
        )
    notes = [Text(f"- {max_batch_note_text(note)}", style="dim") for note in found.notes]
    return Group(head, table, *notes)


def latency_renderable(table: LatencyTable) -> Table:
    """p50/p95/p99 per batch."""
    out = FitTable(
        title=f"inference latency on {table.device_name} ({table.precision}, "
        f"{table.warmup} warm-up runs)" + (" - interrupted" if table.interrupted else ""),
        title_justify="left",
    )
    for column in ("batch", "runs", "p50 ms", "p95 ms", "p99 ms", "samples/s"):
        out.add_column(column, justify="right")
    for row in table.rows:
        out.add_row(
            str(row.batch),
            str(row.runs),
            f"{row.p50 * 1e3:.2f}",
            f"{row.p95 * 1e3:.2f}",
            f"{row.p99 * 1e3:.2f}",
            f"{row.samples_per_second:.1f}",
        )
    return out


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def forecast_lines(forecast: Forecast) -> list[tuple[str, bool]]:
    """What to say before a real run starts: (line, is_warning) pairs."""
    out: list[tuple[str, bool]] = []
    step = forecast.step
    if step is not None and forecast.total_seconds is not None:
        out.append(
            (
                f"predicted: {_duration(step.seconds)} per step on {forecast.device} "
                f"({step.label}), {_duration(forecast.total_seconds)} for the "
                f"{forecast.steps} steps (warm-up included)"
                + (
                    f" and {forecast.loop_steps} back to back (after {FILLING_STEPS} to fill "
                    "the queue)"
                    if forecast.loop_steps
                    else ""
                ),
                False,
            )
        )
        if forecast.long:
            out.append(
                (
                    f"warning: this run is predicted to take {_duration(forecast.total_seconds)},"
                    f" over {LONG_RUN_SECONDS:.0f} s; fewer steps (--steps, --warmup) or a "
                    "smaller --batch or --seq shorten it; Ctrl-C after the first step stops it and "
                    "reports the steps done",
                    True,
                )
            )
    elif forecast.missing:
        out.append((f"no predicted step time: {no_time_text(forecast.missing)}", False))
    if forecast.slow_half is not None:
        out.append((f"warning: {slow_half_text(forecast.slow_half)}", True))
    if forecast.load is not None:
        predicted = step is not None and forecast.total_seconds is not None
        out.append(
            (
                f"warning: this machine is busy (load average {forecast.load:.1f} on "
                f"{forecast.cores} cores): "
                + (
                    "steps will take longer than predicted, which assumes an idle CPU"
                    if predicted
                    else "steps will take longer than on an idle CPU"
                ),
                True,
            )
        )
    return out


def step_line(done: StepDone) -> str:
    """One completed step, as the run goes."""
    kind = "warm-up" if done.warmup else "timed"
    return f"step {done.index + 1}/{done.total} ({kind}): {_duration(done.seconds)}"


def loop_line(window: LoopWindow) -> str:
    """The loop window, once it completes."""
    return (
        f"{window.steps} steps back to back: {_duration(window.seconds)}, "
        f"{_duration(window.step_seconds)} per step"
    )
