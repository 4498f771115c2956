"""A trainer layout's typed notes (`trainfit.export.layout`) and the notes of what
`write_exports` wrote, in words: for the headers of the exported files and the lines the CLI
prints beside them."""

from __future__ import annotations

from trainfit.export.layout import (
    Beside,
    DataParallel,
    DeviceNote,
    FullSharding,
    LayoutNote,
    LightningWrap,
    Machines,
    PlannedGpus,
    RoundedBatch,
)
from trainfit.export.lightning import lightning_fsdp_note
from trainfit.hardware.units import GIB

_BESIDE = {
    Beside.PURE_BF16: (
        "pure bf16 has no trainer flag: load the model with dtype=torch.bfloat16 (no autocast)"
    ),
    Beside.BITSANDBYTES: "the 8-bit optimizer needs bitsandbytes where the job trains",
}


def layout_note_text(note: LayoutNote) -> str:
    """A note of a trainer layout, in words."""
    if isinstance(note, Beside):
        return _BESIDE[note]
    if isinstance(note, RoundedBatch):
        got = note.micro_batch * note.grad_accum * note.gpus
        return (
            f"the effective batch rounds from {note.asked} to {got} "
            f"({note.micro_batch} x {note.grad_accum} accumulation x {note.gpus} GPUs)"
        )
    if isinstance(note, DataParallel):
        return (
            f"data parallel over {note.gpus} GPUs: the plan's memory is one GPU's; DDP adds "
            "its gradient buckets (about one more copy of the gradients) per GPU"
        )
    if isinstance(note, PlannedGpus):
        return f"sharded over the plan's {note.planned} GPUs, not the {note.asked} asked for"
    if isinstance(note, FullSharding):
        return (
            f"FSDP full sharding over {note.gpus} GPUs at {note.per_gpu_bytes / GIB:.2f} GiB "
            "each (modelled, not checked on GPUs)"
        )
    if isinstance(note, Machines):
        return (
            f"{note.machines} machines ({note.instance}): set machine_rank, main_process_ip and "
            "main_process_port on each"
        )
    return f"{note.device} has no TF32 (compute capability 8.0 on): runs as fp32"


def layout_notes_text(notes: tuple[LayoutNote, ...]) -> list[str]:
    """A layout's notes, one line each."""
    return [layout_note_text(n) for n in notes]


def device_note_text(note: DeviceNote) -> str:
    """A note of what `write_exports` wrote, prefixed with its device."""
    if isinstance(note.note, LightningWrap):
        return f"{note.device}: {lightning_fsdp_note(note.note)}"
    return f"{note.device}: {layout_note_text(note.note)}"
