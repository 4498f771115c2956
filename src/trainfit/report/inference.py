"""Render inference estimates: per device, a table of precision x batch with memory and latency."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from trainfit.estimator.generation import GenerationNote, InferenceEstimate, QuantizedModelled
from trainfit.hardware.units import GIB
from trainfit.report.labels import label_text, labels_text, scheme_text
from trainfit.report.model import description_text
from trainfit.report.tables import FitTable


def generation_note_text(note: GenerationNote) -> str:
    """A caveat of a generation estimate, in words."""
    if isinstance(note, QuantizedModelled):
        return (
            f"{note.precision.value}: modelled, not measured; activations and kernels are the "
            "bf16 trace's (dequantization buffers not counted)"
        )
    return "the model's forward has no logits_to_keep: prefill computes every logit"


def generation_notes(e: InferenceEstimate) -> tuple[str, ...]:
    """A generation estimate's caveats, in words."""
    return tuple(generation_note_text(n) for n in e.notes)


def inference_renderable(estimates: Sequence[InferenceEstimate]) -> Group:
    """One table per device: a row per (precision, batch), memory then latency."""
    parts: list[Text | Table] = []
    if not estimates:
        return Group()
    first = estimates[0]
    parts.append(
        Text(
            f"{description_text(first.model_description, generating=True)}\n"
            f"greedy generate(): context {first.context}, "
            f"{first.new_tokens} new tokens per sequence\n",
            style="bold",
        )
    )
    for device in dict.fromkeys(e.device.name for e in estimates):
        rows = [e for e in estimates if e.device.name == device]
        table = FitTable(
            title=f"{rows[0].device.display} ({rows[0].device.memory_bytes / GIB:.1f} GiB)"
        )
        for column in (
            "weights",
            "batch",
            "weights GiB",
            "KV GiB",
            "act GiB",
            "other GiB",
            "needed GiB",
            "fits",
            "prefill ms",
            "ms/tok",
            "tok/s",
            "total ms",
        ):
            justify: JustifyMethod = "left" if column in ("weights", "fits") else "right"
            table.add_column(column, justify=justify)
        for e in rows:
            m = e.memory
            rest = m.runtime_context + m.workspaces + m.allocator_overhead
            table.add_row(
                e.precision.value + ("*" if e.precision.value in ("int8", "int4") else ""),
                str(e.batch),
                f"{m.weights / GIB:.2f}",
                f"{m.kv_cache / GIB:.3f}",
                f"{m.activations / GIB:.3f}",
                f"{rest / GIB:.2f}",
                f"{e.device_memory_needed_bytes / GIB:.2f}",
                Text("yes", style="green") if e.fits else Text("NO", style="bold red"),
                f"{e.prefill_seconds * 1e3:,.1f}",
                f"{e.decode_seconds_per_token * 1e3:,.2f}",
                f"{e.tokens_per_second:,.0f}",
                f"{e.total_seconds * 1e3:,.0f}",
            )
        parts.append(table)
    notes = Text(
        "other = runtime context + cuBLAS workspace + allocator overhead; total = prefill + "
        "(new tokens - 1) decode steps\n",
        style="dim",
    )
    if any(e.precision.value in ("int8", "int4") for e in estimates):
        schemes = {e.precision.value: scheme_text(e.precision) for e in estimates}
        for name in ("int8", "int4"):
            if name in schemes:
                notes.append(f"* {name}: {schemes[name]}\n", style="yellow")
    bound = [e for e in estimates if e.decode_seconds_per_token <= e.decode_host_seconds * 1.0001]
    if bound:
        notes.append(
            f"{len(bound)} of {len(estimates)} rows decode host-bound (eager PyTorch issuing "
            "ops slower than the GPU runs them); bandwidth-bound floor e.g. "
            f"{bound[0].bandwidth_bound_seconds_per_token * 1e3:.3f} ms/token for the first\n",
            style="dim",
        )
    for label, how in sorted(first.labels.items()):
        notes.append(f"{label}: {label_text(how)}\n", style="dim")
    for note in dict.fromkeys(n for e in estimates for n in generation_notes(e)):
        notes.append(f"note: {note}\n", style="dim")
    parts.append(notes)
    return Group(*parts)


def inference_dict(e: InferenceEstimate) -> dict[str, Any]:
    """One inference estimate as JSON (its model described in words)."""
    m = e.memory
    return {
        "model": e.model,
        "device": e.device.name,
        "device_memory_bytes": e.device.memory_bytes,
        "precision": e.precision.value,
        "scheme": scheme_text(e.precision),
        "batch": e.batch,
        "context": e.context,
        "new_tokens": e.new_tokens,
        "memory": {
            "weights": m.weights,
            "kv_cache": m.kv_cache,
            "activations": m.activations,
            "workspaces": m.workspaces,
            "allocator_overhead": m.allocator_overhead,
            "runtime_context": m.runtime_context,
        },
        "device_memory_needed_bytes": e.device_memory_needed_bytes,
        "peak_allocated_bytes": e.peak_allocated_bytes,
        "peak_reserved_bytes": e.peak_reserved_bytes,
        "peak_at": e.peak_at,
        "fits": e.fits,
        "prefill_ms": round(e.prefill_seconds * 1e3, 4),
        "decode_ms_per_token": round(e.decode_seconds_per_token * 1e3, 4),
        "decode_host_ms_per_token": round(e.decode_host_seconds * 1e3, 4),
        "bandwidth_bound_ms_per_token": round(e.bandwidth_bound_seconds_per_token * 1e3, 4),
        "tokens_per_second": round(e.tokens_per_second, 2),
        "total_ms": round(e.total_seconds * 1e3, 3),
        "prefill_flops": e.prefill_flops,
        "decode_bytes_per_token": e.decode_bytes_per_token,
        "model_description": description_text(e.model_description, generating=True),
        "labels": labels_text(e.labels),
        "notes": list(generation_notes(e)),
    }
