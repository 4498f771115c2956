"""`inference_rows(results)`: the report's inference table rows from `estimate_serving()`'s
results (a causal LM's generation, a plain module's forward, or a refusal saying why)."""

from __future__ import annotations

from collections.abc import Iterable

from trainfit.estimator.forward import (
    Failed,
    ForwardEstimate,
    Fp32Generation,
    OffCuda,
    OffGpu,
    ServingRefusal,
    ServingResult,
    Unserved,
)
from trainfit.estimator.generation import InferenceEstimate
from trainfit.hardware.units import GIB
from trainfit.plan.time_words import basis_text, time_note_text
from trainfit.report.document.model import InferenceRow
from trainfit.report.inference import generation_notes
from trainfit.report.labels import labels_text


def _generate_bound(e: InferenceEstimate) -> str:
    """A decode step waits on the host when issuing its ops takes longer than the device's
    work; else on memory bandwidth when reading the weights and cache is most of it."""
    if e.decode_host_seconds >= e.decode_seconds_per_token * 0.999:
        return "host"
    return (
        "bandwidth" if e.bandwidth_bound_seconds_per_token >= 0.5 * e.decode_seconds_per_token
        else "device"
    )  # fmt: skip


def _forward_labels(result: ForwardEstimate) -> dict[str, str]:
    """A forward's labels, the latency's with the step time's basis."""
    labels = labels_text(result.labels)
    return {**labels, "latency": f"{labels['latency']}, {basis_text(result.basis)}"}


def unserved_text(why: Unserved) -> str:
    """Why a (device, precision, batch) is not estimated, in words."""
    if isinstance(why, OffCuda):
        return (
            f"inference is estimated for CUDA GPUs; {why.device!r} is of kind '{why.kind}': "
            "choose a GPU such as h100 or rtx-4060"
        )
    if isinstance(why, Fp32Generation):
        return (
            "fp32 generation is not modelled (the KV cache and decode are 16-bit): choose "
            "fp16, bf16, int8 or int4; fp32 is for a plain module's forward"
        )
    if isinstance(why, OffGpu):
        return (
            f"a forward is estimated for GPUs; {why.device!r} is of kind '{why.kind}': "
            "choose a GPU such as rtx-4060 or m4-pro-16gb"
        )
    if isinstance(why, Failed):
        return why.message
    return (
        f"{why.precision.value} weights are modelled for causal LMs only; a plain module's "
        "forward is estimated at fp32, or fp16 or bf16 autocast"
    )


def refusal_text(refusal: ServingRefusal) -> str:
    """Why a refusal was refused, in one phrase."""
    return "; ".join(unserved_text(why) for why in refusal.why)


def inference_row(result: ServingResult) -> InferenceRow:
    """One row of the report's inference table."""
    if isinstance(result, ServingRefusal):
        return InferenceRow(
            device=result.device,
            precision=result.precision,
            batch=result.batch,
            context=0,
            memory_gib=None,
            fits=None,
            kind="refused",
            note=refusal_text(result),
        )
    if isinstance(result, ForwardEstimate):
        ms = result.seconds * 1e3
        return InferenceRow(
            device=result.device.name,
            precision=result.precision.value,
            batch=result.batch,
            context=0,
            memory_gib=round(result.device_memory_needed_bytes / GIB, 4),
            fits=result.fits,
            kind="forward",
            prefill_ms=round(ms, 4),
            total_ms=round(ms, 4),
            bound=result.bound,
            labels=tuple(sorted(_forward_labels(result).items())),
            note="; ".join(time_note_text(n) for n in result.notes),
        )
    return InferenceRow(
        device=result.device.name,
        precision=result.precision.value,
        batch=result.batch,
        context=result.context,
        new_tokens=result.new_tokens,
        memory_gib=round(result.device_memory_needed_bytes / GIB, 4),
        fits=result.fits,
        kind="generate",
        prefill_ms=round(result.prefill_seconds * 1e3, 4),
        per_token_ms=round(result.decode_seconds_per_token * 1e3, 4),
        decode_tokens_per_second=round(result.tokens_per_second, 2),
        total_ms=round(result.total_seconds * 1e3, 3),
        bound=_generate_bound(result),
        labels=tuple(sorted(labels_text(result.labels).items())),
        note="; ".join(generation_notes(result)),
    )


def inference_rows(results: Iterable[ServingResult]) -> tuple[InferenceRow, ...]:
    """Every result as a row, in order."""
    return tuple(inference_row(r) for r in results)
