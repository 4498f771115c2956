"""Render a LocalMachine (what `trainfit detect` found) for the terminal and as plain text."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console, Group
from rich.text import Text

from trainfit.hardware.detect import LocalMachine, Matching
from trainfit.hardware.detect_words import detect_note_text, matching_text
from trainfit.hardware.units import gib
from trainfit.io import json_ready
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
            unmatched.append(f"cuda:{gpu.index}: {matching_text(gpu.matching)}")
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
            unmatched.append(f"mps: {matching_text(mps.matching)}")
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
        unmatched.append(f"cpu: {matching_text(cpu.matching)}")
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
    for note in machine.notes:
        notes.append(f"note: {detect_note_text(note)}\n", style="dim")
    return Group(head, table, notes)


def local_machine_dict(machine: LocalMachine) -> dict[str, Any]:
    """What `trainfit detect` found as JSON: bytes as integers, sources as their text, the
    matchings and notes in words."""
    out = json_ready(asdict(machine))
    gpus = zip(machine.cuda_gpus, out["cuda_gpus"], strict=True)
    out["cuda_gpus"] = [_match_note(d, gpu.matching) for gpu, d in gpus]
    if machine.mps is not None:
        out["mps"] = _match_note(out["mps"], machine.mps.matching)
    out["cpu"] = _match_note(out["cpu"], machine.cpu.matching)
    out["notes"] = [detect_note_text(n) for n in machine.notes]
    return out


def _match_note(found: dict[str, Any], matching: Matching) -> dict[str, Any]:
    """A device's dict with its matching in words, as `match_note`, in the matching's place."""
    return {
        ("match_note" if k == "matching" else k): matching_text(matching) if k == "matching" else v
        for k, v in found.items()
    }


def render_local_text(machine: LocalMachine, width: int = 100) -> str:
    """The terminal rendering as plain text (no colour), for tests and logs."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(local_machine_renderable(machine))
    return capture.get()
