"""An Estimate in words and as JSON: its typed notes and the reason it has no step time made
into sentences (`trainfit.plan.time_words` gives the step time's)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from trainfit.estimator.result import (
    AppleMemory,
    EmulatedBf16,
    Estimate,
    EstimateNote,
    NoHostRam,
    QloraModelled,
)
from trainfit.hardware.units import GIB
from trainfit.models.live_names import model_label
from trainfit.plan.time_words import no_time_text, step_time_dict
from trainfit.report.labels import labels_text
from trainfit.report.model import description_text, loss_text
from trainfit.trace.compat import UntestedTorch
from trainfit.trace.recorder import DataCheck


def estimate_note_text(note: EstimateNote) -> str:
    """One note of an Estimate in words."""
    if isinstance(note, EmulatedBf16):
        major, minor = note.compute_capability
        return (
            f"{note.device} (compute capability {major}.{minor}) has no native "
            f"{note.precision.value}: PyTorch emulates it (torch.cuda.is_bf16_supported() "
            "is True there), so the step runs in the memory estimated, but slower than "
            "fp16, which is native: consider --precision fp16"
        )
    if isinstance(note, AppleMemory):
        return (
            f"Apple GPU: modelled, not measured; the limit used is Metal's recommended working "
            f"set ({note.working_set_bytes / GIB:.1f} GiB); PyTorch refuses allocations past "
            "1.7 times it, and macOS swaps before that; MPSGraph's own buffers are not counted"
        )
    if isinstance(note, QloraModelled):
        return (
            "QLoRA is modelled, not measured: each Linear but the head holds 0.5 byte per "
            "weight plus its block scales and is dequantised to the compute dtype per matmul "
            "(forward and backward); the non-quantised weights stay in the load dtype "
            "(prepare_model_for_kbit_training would upcast them to fp32); AdamW is bitsandbytes' "
            "paged 8-bit AdamW, its state counted on the device"
        )
    if isinstance(note, NoHostRam):
        return "the host's RAM could not be detected: no fits verdict"
    return untested_torch_text(note)


def data_check_text(check: DataCheck) -> str:
    """A data-dependent value the trace answered without data, in words."""
    where = f"module {check.module!r}" if check.module else "the loss"
    return (
        f"a data-dependent check ({check.op or 'scalar'}) in {where} was answered "
        f"{check.answer.value}, as for unpadded random inputs"
    )


def untested_torch_text(note: UntestedTorch) -> str:
    """A torch release the tracer is not tested on, in words."""
    major, minor = note.release
    tested = ", ".join(f"{a}.{b}" for a, b in note.tested)
    return (
        f"torch {major}.{minor} is not among the releases trainfit is tested on ({tested}); the "
        "tracer uses torch internals that may have changed"
    )


def estimate_notes(result: Estimate) -> tuple[str, ...]:
    """An Estimate's notes in words, why it has no step time last."""
    why = result.step_time_missing
    return tuple(estimate_note_text(n) for n in result.notes) + (
        () if why is None else (no_time_text(why),)
    )


def estimate_dict(result: Estimate) -> dict[str, Any]:
    """An Estimate as JSON (bytes as integers, notes in words)."""
    spec = asdict(result.spec)
    # NB: a live model's import paths resolve in the process that estimated it only
    for name in ("model", "step_fn"):
        if spec[name] is not None:
            spec[name] = model_label(spec[name])
    spec["precision"] = result.spec.precision.value
    spec["optimizer"] = result.spec.optimizer.value
    # NB: the dtype and cache settings appear only where asked (earlier JSON stays as it was)
    for name, default in (("weights_dtype", "auto"), ("reference_dtype", None)):
        value = spec.pop(name)
        if value is not None and value.value != default:
            spec[name] = value.value
    if spec.pop("optimizer_path") != "auto":
        spec["optimizer_path"] = result.spec.optimizer_path.value
    if spec.pop("use_cache") is not None:
        spec["use_cache"] = result.spec.use_cache
    spec["inputs"] = [
        f"{i.name}={','.join(str(d) for d in i.dims)}:{str(i.dtype).removeprefix('torch.')}"
        for i in result.spec.inputs
    ]
    return {
        "device": result.device.name,
        "device_display": result.device.display,
        "device_memory_bytes": result.device.memory_bytes,
        "device_memory_needed_bytes": result.device_memory_needed_bytes,
        "peak_allocated_bytes": result.peak_allocated_bytes,
        "peak_reserved_bytes": result.peak_reserved_bytes,
        "breakdown": asdict(result.breakdown),
        "peak": {
            "phase": result.peak_phase.value,
            "iteration": "first" if result.peak_iteration == 0 else "steady",
            "op": result.peak_op,
        },
        "fits": result.fits,
        "model": description_text(result.model_description),
        "loss": loss_text(result.loss_note),
        "parameters": result.parameter_count,
        "trainable_parameters": result.trainable_parameter_count,
        "lora": None if result.spec.lora is None else result.spec.lora.to_dict(),
        "attention_kernels": result.attention_kernels,
        "assumptions": [data_check_text(a) for a in result.assumptions],
        "labels": labels_text(result.labels),
        "notes": list(estimate_notes(result)),
        "seconds": round(result.seconds, 3),
        "time": None if result.step_time is None else step_time_dict(result.step_time),
        "dtypes": None if result.dtypes is None else result.dtypes.to_dict(),
        "model_class": None if result.model_class is None else result.model_class.to_dict(),
        "spec": spec,
    }
