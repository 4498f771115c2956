"""Render a LocalMachine (what `trainfit detect` found) for the terminal and as plain text."""

from __future__ import annotations

from rich.console import Console, Group
from rich.text import Text

from trainfit.hardware.detect import LocalMachine
from trainfit.hardware.units import gib
from trainfit.report.tables import FitTable


def _or_unknown(value: int | None, suffix: str = "") -> str:
    return "unknown" if value is None else f"{gib(value)}{suffix}"


def local_machine_renderable(machine: LocalMachine) -> Group:
    """A rich renderable: one row per device found, then versions, sources and notes."""
    table = FitTable(title="this machine", show_edge=False, pad_edge=False)
    for column in ("", "device", "memory", "usable now", "details", "catalog row"):
        table.add_column(column)
    unmatched: list[str] = []
    for gpu in machine.cuda_gpus:
        major, minor = gpu.compute_capability
        table.add_row(
            f"cuda:{gpu.index}",
            gpu.name,
            gib(gpu.total_memory_bytes),
            _or_unknown(gpu.free_memory_bytes, " free"),
            f"cc {major}.{minor}, {gpu.multiprocessor_count} SMs",
            gpu.catalog_match or "-",
        )
        if gpu.catalog_match is None:
            unmatched.append(f"cuda:{gpu.index}: {gpu.match_note}")
    if machine.mps is not None:
        mps = machine.mps
        table.add_row(
            "mps",
            mps.chip or "unknown chip",
            _or_unknown(mps.unified_memory_bytes, " unified"),
            _or_unknown(mps.recommended_max_memory_bytes, " Metal limit"),
            "-",
            mps.catalog_match or "-",
        )
        if mps.catalog_match is None:
            unmatched.append(f"mps: {mps.match_note}")
    cpu = machine.cpu
    cores = f"{'?' if cpu.usable_cores is None else cpu.usable_cores}/" + (
        "?" if cpu.logical_cores is None else str(cpu.logical_cores)
    )
    table.add_row(
        "cpu",
        cpu.model or "unknown model",
        _or_unknown(cpu.total_ram_bytes, " RAM"),
        "-",
        f"{cores} cores usable, {cpu.torch_threads} torch threads",
        cpu.catalog_match or "-",
    )
    if cpu.catalog_match is None:
        unmatched.append(f"cpu: {cpu.match_note}")
    head = Text()
    head.append(f"torch {machine.torch_version}")
    head.append(
        f", CUDA runtime {machine.cuda_runtime_version}"
        if machine.cuda_runtime_version
        else ", no CUDA runtime"
    )
    if machine.cuda_gpus:
        head.append(
            f", driver {machine.driver_version or 'unknown'}"
            f" via {machine.driver_version_source.value}"
        )
    notes = Text()
    sources = [f"cpu model from {cpu.model_source.value}"]
    if machine.cuda_gpus:
        sources.append("GPU free memory from torch.cuda.mem_get_info")
    if machine.mps is not None:
        sources.append(
            f"MPS chip from {machine.mps.chip_source.value}, memory from "
            f"{machine.mps.unified_memory_source.value}, recommended limit from "
            f"{machine.mps.recommended_max_memory_source.value}"
        )
    notes.append(f"sources: {'; '.join(sources)}\n", style="dim")
    for line in unmatched:
        notes.append(f"{line}\n", style="yellow")
    for line in machine.notes:
        notes.append(f"note: {line}\n", style="dim")
    return Group(head, table, notes)


def render_local_text(machine: LocalMachine, width: int = 100) -> str:
    """The terminal rendering as plain text (no colour), for tests and logs."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(local_machine_renderable(machine))
    return capture.get()
