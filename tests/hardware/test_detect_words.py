"""What detection found, in words (exact strings): every matching and every note."""

from __future__ import annotations

from trainfit.hardware.catalog import DeviceKind
from trainfit.hardware.detect import (
    FreeMemoryUnknown,
    GpuUnreadable,
    Matched,
    MatchHow,
    MpsLimitFailed,
    MpsUnavailable,
    NoCudaGpu,
    NoMpsLimit,
    OtherKind,
    OtherMemory,
    RamUnknown,
    Unmatched,
)
from trainfit.hardware.detect_words import detect_note_text, matching_text
from trainfit.hardware.units import GIB


def test_each_matching_in_words() -> None:
    assert matching_text(Matched(row="h100", how=MatchHow.NAME_AND_MEMORY)) == (
        "catalog row 'h100': the name and memory agree"
    )
    assert matching_text(Matched(row="t4", how=MatchHow.NAME)) == (
        "catalog row 't4': the name agrees"
    )
    assert matching_text(Matched(row="cpu", how=MatchHow.CPU_HOST)) == (
        "catalog row 'cpu': a CPU-only host, its memory this host's RAM"
    )
    assert matching_text(Unmatched(name=None)) == "chip name unknown; described as found"
    assert (
        matching_text(Unmatched(name="GPU Z")) == "no catalog row for 'GPU Z'; described as found"
    )
    assert matching_text(Unmatched(name="GPU Z", close=("gpu-y", "gpu-x"))) == (
        "no catalog row for 'GPU Z'; described as found (closest rows: gpu-y, gpu-x)"
    )
    rejected = (
        OtherKind(row="cpu", row_kind=DeviceKind.CPU, kind="mps"),
        OtherMemory(row="a100", row_bytes=80 * GIB, found_bytes=40 * GIB),
    )
    assert matching_text(Unmatched(name="A100", rejected=rejected)) == (
        "no catalog row for 'A100'; described as found (name matched but 'cpu' is a cpu row, "
        "not mps; 'a100' has 80.0 GiB, this one 40.0 GiB)"
    )


def test_each_detect_note_in_words() -> None:
    assert [
        detect_note_text(n)
        for n in (
            GpuUnreadable(index=1, error="CUDA error: unknown"),
            FreeMemoryUnknown(index=0, error="CUDA error: busy"),
            NoCudaGpu(torch_version="2.13.0", runtime=None),
            NoCudaGpu(torch_version="2.13.0", runtime="12.8"),
            MpsUnavailable(),
            MpsLimitFailed(error="RuntimeError: no Metal"),
            NoMpsLimit(torch_version="2.1.0"),
            RamUnknown(),
        )
    ] == [
        "CUDA GPU 1: torch could not read its properties: CUDA error: unknown",
        "CUDA GPU 0: free memory unknown: CUDA error: busy",
        "no CUDA GPU: torch 2.13.0 is built without CUDA",
        "no CUDA GPU: torch 2.13.0 is built with CUDA 12.8 but sees no GPU",
        "MPS not available (torch.backends.mps.is_available() is False)",
        "MPS: torch.mps.recommended_max_memory() failed: RuntimeError: no Metal",
        "MPS: torch 2.1.0 has no torch.mps.recommended_max_memory(); the working-set limit "
        "Metal recommends is unknown",
        "total RAM unknown (neither os.sysconf nor sysctl hw.memsize answered)",
    ]
