"""What detection found, in words: how a device was matched to its catalog row (or why not)
and what could not be read (`trainfit.hardware.detect`), for `trainfit detect`'s table and
JSON and for the error that names a device missing from the catalog."""

from __future__ import annotations

from trainfit.hardware.detect import (
    DetectNote,
    FreeMemoryUnknown,
    GpuUnreadable,
    Matched,
    MatchHow,
    Matching,
    MpsLimitFailed,
    MpsUnavailable,
    NoCudaGpu,
    NoMpsLimit,
    OtherKind,
    OtherMemory,
)
from trainfit.hardware.units import GIB

_AGREED = {
    MatchHow.NAME: "the name agrees",
    MatchHow.NAME_AND_MEMORY: "the name and memory agree",
    MatchHow.CPU_HOST: "a CPU-only host, its memory this host's RAM",
}


def matching_text(matching: Matching) -> str:
    """How a device was matched to its catalog row, or why none is it, in words."""
    if isinstance(matching, Matched):
        return f"catalog row {matching.row!r}: {_AGREED[matching.how]}"
    if matching.name is None:
        return "chip name unknown; described as found"
    text = f"no catalog row for {matching.name!r}; described as found"
    if matching.rejected:
        return text + f" (name matched but {'; '.join(map(_rejected, matching.rejected))})"
    if matching.close:
        return text + f" (closest rows: {', '.join(matching.close)})"
    return text


def _rejected(row: OtherKind | OtherMemory) -> str:
    if isinstance(row, OtherKind):
        return f"{row.row!r} is a {row.row_kind} row, not {row.kind}"
    return (
        f"{row.row!r} has {row.row_bytes / GIB:.1f} GiB, this one {row.found_bytes / GIB:.1f} GiB"
    )


def detect_note_text(note: DetectNote) -> str:
    """What detection could not read or did not find, in words."""
    if isinstance(note, GpuUnreadable):
        return f"CUDA GPU {note.index}: torch could not read its properties: {note.error}"
    if isinstance(note, FreeMemoryUnknown):
        return f"CUDA GPU {note.index}: free memory unknown: {note.error}"
    if isinstance(note, NoCudaGpu):
        if note.runtime is None:
            return f"no CUDA GPU: torch {note.torch_version} is built without CUDA"
        return (
            f"no CUDA GPU: torch {note.torch_version} is built with CUDA {note.runtime} but sees "
            "no GPU"
        )
    if isinstance(note, MpsUnavailable):
        return "MPS not available (torch.backends.mps.is_available() is False)"
    if isinstance(note, MpsLimitFailed):
        return f"MPS: torch.mps.recommended_max_memory() failed: {note.error}"
    if isinstance(note, NoMpsLimit):
        return (
            f"MPS: torch {note.torch_version} has no torch.mps.recommended_max_memory(); the "
            "working-set limit Metal recommends is unknown"
        )
    return "total RAM unknown (neither os.sysconf nor sysctl hw.memsize answered)"
