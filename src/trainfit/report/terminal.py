"""Render an Estimate for the terminal (rich) and as plain text."""

from __future__ import annotations

import math

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from trainfit.estimator.result import Estimate
from trainfit.estimator.scaling import MaxBatch
from trainfit.hardware.catalog import Device, DeviceKind
from trainfit.hardware.figures import SourceKind
from trainfit.hardware.units import GIB, gib
from trainfit.models.heads import ClassReason, ModelClass
from trainfit.plan.cost_words import cost_notes_text, recommendation_text
from trainfit.plan.time_words import basis_text, no_time_text, time_note_text
from trainfit.plan.words import input_text
from trainfit.provenance import Provenance
from trainfit.report.estimate import data_check_text, estimate_notes
from trainfit.report.labels import label_text
from trainfit.report.model import description_text, loss_text
from trainfit.report.tables import FitTable
from trainfit.timing.run import RunEstimate


def estimate_renderable(result: Estimate) -> Group:
    """A rich renderable: headline, breakdown table, and notes."""
    return Group(_headline(result), _breakdown_table(result), _notes(result))


def _spec_line(result: Estimate) -> str:
    """What was estimated: batch, sequence, precision, optimizer ... and the device."""
    spec = result.spec
    return (
        f"batch {spec.batch}"
        + (
            f" pairs ({spec.preference.value}, reference {spec.reference.value})"
            if spec.preference is not None
            else ""
        )
        + (f" x {spec.multiplier}" if spec.multiplier > 1 else "")
        + (f", seq {spec.seq_len}" if spec.seq_len else "")
        + f", {spec.precision.value}, {spec.optimizer.value}"
        + (", checkpointing" if spec.checkpointing else "")
        + (f", frozen {', '.join(spec.freeze)}" if spec.freeze else "")
        + (f", accumulation {spec.grad_accum}" if spec.grad_accum > 1 else "")
        + (f", clip {spec.grad_clip}" if spec.grad_clip else "")
        + f" on {result.device.display}\n"
    )


def _headline(result: Estimate) -> Text:
    """The model, the spec, the memory needed and whether it fits, and where the peak is."""
    device = result.device
    verdict = ""
    if result.fits is not None:
        share = result.device_memory_needed_bytes / device.memory_bytes
        verdict = (
            f"fits ({share:.0%} of {gib(device.memory_bytes)})"
            if result.fits
            else f"does NOT fit ({share:.0%} of {gib(device.memory_bytes)})"
        )
    head = Text()
    head.append(f"{description_text(result.model_description)}\n", style="bold")
    head.append(_spec_line(result))
    cpu = device.kind is DeviceKind.CPU
    head.append(
        "memory needed (peak RSS increase): " if cpu else "device memory needed: ", style="bold"
    )
    head.append(gib(result.device_memory_needed_bytes), style="bold cyan")
    if verdict:
        head.append(f"  -> {verdict}", style="green" if result.fits else "bold red")
    iteration = "first iteration" if result.peak_iteration == 0 else "steady state"
    head.append(f"\npeak in the {result.peak_phase.value} pass ({iteration})")
    usable = _usable_line(device)
    if usable and result.fits is not None:
        head.append(f"\n{usable}")
    return head


def _usable_line(device: Device) -> str:
    """What the memory a verdict compares with is, where it is less than the box says."""
    visible, box = device.memory_visible_bytes, device.memory_gb
    if device.kind is not DeviceKind.CUDA or not visible.known or not box.known:
        return ""
    whence = {
        SourceKind.MEASURED: "measured",
        SourceKind.FITTED: "a rule fitted on public out-of-memory messages of other cards",
        SourceKind.SECONDARY: "the 'total capacity' of public out-of-memory messages on this card",
    }.get(visible.source.kind if visible.source else None, "the catalog")
    # NB: a laptop's display runs on the integrated GPU (other processes held 0.01-0.02 GiB in
    # the laptop messages), a desktop GeForce card's often on the card (0.6-2.2 GiB)
    desktop = "GeForce" in device.display and "Laptop" not in device.display
    display = "; a display on the card takes more" if desktop else ""
    return (
        f"usable: {gib(int(visible.value))} of the {box.value:g} GB (what PyTorch sees: "
        f"{whence}){display}"
    )


def _breakdown_table(result: Estimate) -> Table:
    """The memory at the peak by component, with each one's share."""
    table = FitTable(title="breakdown at the peak", show_edge=False, pad_edge=False)
    table.add_column("component")
    table.add_column("memory", justify="right")
    table.add_column("share", justify="right")
    total = result.device_memory_needed_bytes
    rows = [
        ("parameters", result.breakdown.parameters),
        ("gradients", result.breakdown.gradients),
        ("optimizer state", result.breakdown.optimizer_state),
        ("activations", result.breakdown.activations),
        ("temporaries", result.breakdown.temporaries),
        ("workspaces (cuBLAS, cuDNN)", result.breakdown.workspaces),
        ("allocator overhead", result.breakdown.allocator_overhead),
        ("runtime context", result.breakdown.runtime_context),
    ]
    for name, value in rows:
        table.add_row(name, gib(value), f"{value / total:.0%}" if total else "-")
    table.add_row("total", gib(total), "100%", style="bold")
    return table


_CLASS_REASON = {
    ClassReason.TASK_OPTION: "the task given (--task)",
    ClassReason.CATALOG: "the catalog's task for this model",
    ClassReason.ARCHITECTURES: "the config's architectures",
    ClassReason.HEADLESS_ARCHITECTURE: "the model type's usual task",
    ClassReason.MODEL_TYPE: "the model type's usual task (the config names no architecture)",
}


def model_class_words(chosen: ModelClass) -> str:
    """ "DistilBertForSequenceClassification (sequence-classification), from the config's
    architectures"."""
    why = _CLASS_REASON[chosen.reason]
    if chosen.reason is ClassReason.HEADLESS_ARCHITECTURE:
        why += f" (the config names {chosen.architecture}, which has no training head)"
    elif chosen.reason is not ClassReason.ARCHITECTURES and chosen.architecture not in (
        None,
        chosen.name,
    ):
        why += f"; the config names {chosen.architecture}"
    return f"{chosen.name} ({chosen.task.value}), from {why}"


def _notes(result: Estimate) -> Text:
    """Peaks, parameters, the loss, LoRA, attention kernels, modelled figures and notes."""
    notes = Text()
    notes.append(
        f"\npeak allocated {gib(result.peak_allocated_bytes)}, "
        + (
            "peak resident (malloc replay) "
            if result.device.kind is DeviceKind.CPU
            else "peak reserved "
        )
        + f"{gib(result.peak_reserved_bytes)}; "
        f"{result.parameter_count / 1e6:,.1f}M parameters "
        f"({result.trainable_parameter_count / 1e6:,.1f}M trainable)\n"
    )
    notes.append(f"loss: {loss_text(result.loss_note)}\n")
    if result.model_class is not None:
        notes.append(f"built as {model_class_words(result.model_class)}\n")
    if result.dtypes is not None:
        d = result.dtypes
        notes.append(
            f"dtypes: weights {d.weights}; gradients {d.gradients}; "
            f"optimizer state {d.optimizer_state}\n"
        )
    if result.spec.lora is not None:
        share = result.trainable_parameter_count / max(1, result.parameter_count)
        notes.append(
            f"trainable with {'QLoRA' if result.spec.lora.qlora else 'LoRA'}: "
            f"{result.trainable_parameter_count:,} of {result.parameter_count:,} parameters "
            f"({share:.2%})\n"
        )
    if result.attention_kernels:
        kernels = ", ".join(f"{k} x{v}" for k, v in sorted(result.attention_kernels.items()))
        notes.append(f"attention kernels: {kernels}\n")
    for label, how in sorted(result.labels.items()):
        if how.provenance in (Provenance.MODELLED, Provenance.NOT_MODELLED):
            notes.append(f"{label}: {label_text(how)}\n", style="yellow")
    assumed = tuple(data_check_text(a) for a in result.assumptions)
    for line in (*assumed, *estimate_notes(result)):
        notes.append(f"note: {line}\n", style="dim")
    notes.append(f"estimated in {result.seconds:.1f} s", style="dim")
    return notes


def render_text(result: Estimate, width: int = 100) -> str:
    """The terminal rendering as plain text (no colour), for tests and logs."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(estimate_renderable(result))
    return capture.get()


def max_batch_text(found: MaxBatch) -> str:
    """One line: the largest micro-batch that fits, and what it and the next one need."""
    kept = f" keeping {found.margin:.0%} free" if found.margin else ""
    if found.batch == 0:
        return (
            f"not even a micro-batch of 1 fits {found.device_name}{kept}: it needs "
            f"{found.needed_bytes / GIB:.2f} GiB of {found.budget_bytes / GIB:.2f} GiB"
        )
    line = (
        f"largest micro-batch that fits {found.device_name}{kept}: {found.batch} "
        f"(needs {found.needed_bytes / GIB:.2f} GiB of {found.budget_bytes / GIB:.2f} GiB"
    )
    if found.needed_bytes > found.budget_bytes:
        line += ", in less once the allocator releases its cache at out-of-memory"
    if found.next_needed_bytes is None:
        return line + "; the search stopped at its limit)"
    return line + f"; {found.batch + 1} would need {found.next_needed_bytes / GIB:.2f} GiB)"


def _money(x: float | None, currency: str) -> str:
    return "-" if x is None else f"{x:,.2f} {currency}"


def does_not_fit_text(result: Estimate, priced: bool = False) -> str:
    """One line for a step that does not fit: the run is not priced (`priced`: a data size
    was given), and where to go next."""
    spec = result.spec
    not_priced = "; its run is not priced or recommended" if priced else ""
    return (
        f"trainfit: the step does not fit {result.device.name}{not_priced}: find the "
        "micro-batch that fits by adding --max-batch to this command, or the settings "
        f"that fit with `trainfit plan {spec.model} --effective-batch "
        f"{spec.batch * spec.grad_accum} --device {result.device.name}`"
    )


def time_renderable(result: Estimate, totals: RunEstimate | None = None) -> Group:
    """The step time (and the run's hours and costs) of an estimate."""
    step = result.step_time
    out = Text()
    if step is None:
        missing = result.step_time_missing
        why = "step time not modelled for this device" if missing is None else no_time_text(missing)
        out.append(f"\n{why}\n", style="yellow")
        return Group(out)
    out.append("\nstep time: ", style="bold")
    out.append(f"{step.seconds * 1000:,.1f} ms", style="bold cyan")
    out.append(f" per optimizer step ({step.label})\n")
    out.append(
        f"forward {step.forward_seconds * 1000:.1f} ms, backward "
        f"{step.backward_seconds * 1000:.1f} ms per micro-batch; optimizer "
        f"{step.optimizer_seconds * 1000:.1f} ms\n"
        f"{step.samples_per_second:,.1f} {result.spec.sample_unit}/s"
        + (f", {step.tokens_per_second:,.0f} tokens/s" if step.tokens_per_second else "")
        + f"; {step.flops_per_step / 1e12:,.2f} TFLOP per step\n"
        + (
            f"time: {step.compute_bound_share:.0%} in matrix multiplies and convolutions, "
            f"{step.memory_bound_share:.0%} in other ops\n"
            if result.device.kind is DeviceKind.CPU
            else f"device time: {step.compute_bound_share:.0%} compute-bound, "
            f"{step.memory_bound_share:.0%} memory-bound; waiting for the host "
            f"{step.host_bound_share:.0%}\n"
        )
    )
    out.append(f"basis: {basis_text(step.basis)}\n", style="dim")
    for note in step.notes:
        out.append(f"note: {time_note_text(note)}\n", style="dim")
    parts: list[object] = [out]
    if totals is not None:
        t = totals.time
        head = Text(
            f"run: {t.hours:,.2f} h on {t.gpus} x {result.device.display} ({t.steps:,} steps"
            + (
                f", all-reduce {t.communication_seconds * 1000:.1f} ms/step exposed"
                if t.gpus > 1
                else ""
            )
            + f", {t.label})\n",
            style="bold",
        )
        table = FitTable(title="cost of the run", show_edge=False, pad_edge=False)
        for column in ("option", "hours", "on-demand", "spot", "electricity", "share of price"):
            table.add_column(column, justify="left" if column == "option" else "right")
        table.add_column("note")
        currency = totals.run.currency
        for line in totals.costs:
            table.add_row(
                line.option,
                "-" if math.isnan(line.hours) else f"{line.hours:,.2f}",
                _money(line.on_demand, currency),
                _money(line.spot, currency),
                _money(line.electricity, currency),
                _money(line.amortisation, currency),
                cost_notes_text(line),
            )
        head.append(input_text(t, totals.run.data_rate) + "\n", style="dim")
        words = Text(recommendation_text(totals.recommendation) + "\n")
        parts += [head, table, words]
    return Group(*parts)
