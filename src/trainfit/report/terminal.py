"""Render an Estimate for the terminal (rich) and as plain text."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from trainfit.estimate import Estimate
from trainfit.memory.scaling import MaxBatch

GiB = 1 << 30


def gib(n: int) -> str:
    """Bytes as GiB with two decimals."""
    return f"{n / GiB:.2f} GiB"


def estimate_renderable(result: Estimate) -> Group:
    """A rich renderable: headline, breakdown table, and notes."""
    spec = result.spec
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
    head.append(f"{result.model_description}\n", style="bold")
    head.append(
        f"batch {spec.batch}"
        + (f" x {spec.multiplier}" if spec.multiplier > 1 else "")
        + (f", seq {spec.seq_len}" if spec.seq_len else "")
        + f", {spec.precision.value}, {spec.optimizer.value}"
        + (", checkpointing" if spec.checkpointing else "")
        + (f", frozen {', '.join(spec.freeze)}" if spec.freeze else "")
        + (f", accumulation {spec.grad_accum}" if spec.grad_accum > 1 else "")
        + (f", clip {spec.grad_clip}" if spec.grad_clip else "")
        + f" on {device.display}\n"
    )
    cpu = device.kind == "cpu"
    head.append(
        "memory needed (peak RSS increase): " if cpu else "device memory needed: ", style="bold"
    )
    head.append(gib(result.device_memory_needed_bytes), style="bold cyan")
    if verdict:
        head.append(f"  -> {verdict}", style="green" if result.fits else "bold red")
    iteration = "first iteration" if result.peak_iteration == 0 else "steady state"
    head.append(f"\npeak in the {result.peak_phase.value} pass ({iteration})")
    table = Table(title="breakdown at the peak", show_edge=False, pad_edge=False)
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
    notes = Text()
    notes.append(
        f"\npeak allocated {gib(result.peak_allocated_bytes)}, "
        + ("peak resident (malloc replay) " if device.kind == "cpu" else "peak reserved ")
        + f"{gib(result.peak_reserved_bytes)}; "
        f"{result.parameter_count / 1e6:,.1f}M parameters "
        f"({result.trainable_parameter_count / 1e6:,.1f}M trainable)\n"
    )
    notes.append(f"loss: {result.loss_note}\n")
    if result.attention_kernels:
        kernels = ", ".join(f"{k} x{v}" for k, v in sorted(result.attention_kernels.items()))
        notes.append(f"attention kernels: {kernels}\n")
    for label, how in sorted(result.labels.items()):
        if "modelled" in how:
            notes.append(f"{label}: {how}\n", style="yellow")
    for line in (*result.assumptions, *result.notes):
        notes.append(f"note: {line}\n", style="dim")
    notes.append(f"estimated in {result.seconds:.1f} s", style="dim")
    return Group(head, table, notes)


def render_text(result: Estimate, width: int = 100) -> str:
    """The terminal rendering as plain text (no colour), for tests and logs."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(estimate_renderable(result))
    return capture.get()


def max_batch_text(found: MaxBatch) -> str:
    """One line: the largest micro-batch that fits, and what it and the next one need."""
    gib = 2**30
    kept = f" keeping {found.margin:.0%} free" if found.margin else ""
    if found.batch == 0:
        return (
            f"not even a micro-batch of 1 fits {found.device_name}{kept}: it needs "
            f"{found.needed_bytes / gib:.2f} GiB of {found.budget_bytes / gib:.2f} GiB"
        )
    line = (
        f"largest micro-batch that fits {found.device_name}{kept}: {found.batch} "
        f"(needs {found.needed_bytes / gib:.2f} GiB of {found.budget_bytes / gib:.2f} GiB"
    )
    if found.needed_bytes > found.budget_bytes:
        line += ", in less once the allocator releases its cache at out-of-memory"
    if found.next_needed_bytes is None:
        return line + "; the search stopped at its limit)"
    return line + f"; {found.batch + 1} would need {found.next_needed_bytes / gib:.2f} GiB)"
