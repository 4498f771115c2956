"""Render a Diagnosis (what `trainfit doctor` found) for the terminal, as plain text and as
JSON; each check's words and fix come from `trainfit.report.doctor_words`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from trainfit.io import json_ready
from trainfit.measure.diagnosis import Check, Diagnosis, Status
from trainfit.report.doctor_words import fix_text, found_text
from trainfit.report.tables import FitTable

_LABEL = {Status.OK: "ok", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "skip"}
_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def _versions(diagnosis: Diagnosis) -> str:
    parts = [f"torch {diagnosis.torch_version or 'unknown'}"]
    parts.append(f"CUDA {diagnosis.cuda_build}" if diagnosis.cuda_build else "no CUDA build")
    if diagnosis.driver_version or diagnosis.driver_cuda_version:
        parts.append(
            f"driver {diagnosis.driver_version or 'unknown'}"
            + (f" (CUDA {diagnosis.driver_cuda_version})" if diagnosis.driver_cuda_version else "")
        )
    if diagnosis.nccl_version:
        parts.append(f"NCCL {diagnosis.nccl_version}")
    return ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _summary(diagnosis: Diagnosis) -> Text:
    counts = {s: diagnosis.count(s) for s in Status}
    tally = (
        f"{_plural(len(diagnosis.checks), 'check')}: {counts[Status.OK]} ok, "
        f"{_plural(counts[Status.WARN], 'warning')}, {counts[Status.FAIL]} failed, "
        f"{counts[Status.SKIP]} skipped"
    )
    if diagnosis.ok:
        return Text(f"{tally} -> the stack works", style="green")
    return Text(f"{tally} -> the stack is broken; fix the failures above", style="bold red")


def doctor_renderable(diagnosis: Diagnosis) -> Group:
    """A rich renderable: versions, one row per check, the fixes, and a one-line verdict."""
    table = FitTable(title="trainfit doctor", show_edge=False, pad_edge=False)
    table.add_column("")
    table.add_column("check", no_wrap=True)
    table.add_column("result")
    for check in diagnosis.checks:
        table.add_row(
            Text(_LABEL[check.status], style=_STYLE[check.status]),
            check.name,
            found_text(check.found),
        )
    parts: list[RenderableType] = [Text(_versions(diagnosis)), table]
    todo = [
        (c, fix)
        for c in diagnosis.checks
        if (fix := fix_text(c.found)) and c.status in {Status.FAIL, Status.WARN}
    ]
    if todo:
        fixes = Table.grid(padding=(0, 1))
        fixes.add_column(no_wrap=True)
        fixes.add_column()
        for check, fix in todo:
            fixes.add_row(Text(f"{check.name}:", style=_STYLE[check.status]), fix)
        parts += [Text("to fix:", style="bold"), fixes]
    parts.append(_summary(diagnosis))
    return Group(*parts)


def render_doctor_text(diagnosis: Diagnosis, width: int = 100) -> str:
    """The terminal rendering as plain text (no colour), for tests and logs."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(doctor_renderable(diagnosis))
    return capture.get()


def diagnosis_dict(diagnosis: Diagnosis) -> dict[str, Any]:
    """A JSON-ready dict: the fields, statuses as their text, each check's finding and fix in
    words, plus "ok"."""
    out = json_ready(asdict(diagnosis))
    out["checks"] = [check_dict(c) for c in diagnosis.checks]
    out["ok"] = diagnosis.ok
    return out


def check_dict(check: Check) -> dict[str, Any]:
    """One check as JSON: its name, status, what it found and its fix, in words."""
    return {
        "name": check.name,
        "status": check.status.value,
        "detail": found_text(check.found),
        "fix": fix_text(check.found),
    }
