"""The glibc malloc replay: chunk sizes, the mmap threshold and its dynamic rule, trimming."""

from __future__ import annotations

from trainfit.memory.malloc import (
    DEFAULT_MMAP_THRESHOLD,
    DEFAULT_TOP_PAD,
    PAGE,
    GlibcHeap,
    chunk_size,
    mmap_size,
)

KiB = 1 << 10
MiB = 1 << 20


def test_chunk_and_mapping_sizes() -> None:
    assert chunk_size(1) == 32
    assert chunk_size(24) == 32
    assert chunk_size(25) == 48
    assert chunk_size(4096) == 4112
    assert mmap_size(1 * MiB) == MiB + PAGE  # header and memalign slack take one more page


def test_large_blocks_are_mapped_and_returned() -> None:
    heap = GlibcHeap()
    heap.malloc(1, 4 * MiB)
    assert heap.mapped_bytes == mmap_size(4 * MiB)
    assert heap.resident == mmap_size(4 * MiB)
    heap.free(1)
    assert heap.resident == 0
    assert heap.peak_resident == mmap_size(4 * MiB)
    assert heap.peak_allocated == 4 * MiB


def test_freeing_a_mapping_raises_the_threshold() -> None:
    heap = GlibcHeap()
    heap.malloc(1, 1 * MiB)
    heap.free(1)
    assert heap.mmap_threshold == mmap_size(1 * MiB)
    assert heap.trim_threshold == 2 * mmap_size(1 * MiB)
    heap.malloc(2, 512 * KiB)  # now below the threshold: from the heap
    assert heap.mapped_bytes == 0
    assert heap.resident >= 512 * KiB


def test_threshold_stops_at_32_mib() -> None:
    heap = GlibcHeap()
    heap.malloc(1, 64 * MiB)
    heap.free(1)
    assert heap.mmap_threshold == DEFAULT_MMAP_THRESHOLD


def test_freed_heap_chunks_stay_resident_and_are_reused() -> None:
    heap = GlibcHeap()
    heap.malloc(1, 64 * KiB)
    heap.malloc(2, 64 * KiB)  # pins the first chunk below the top
    resident = heap.resident
    heap.free(1)
    assert heap.resident == resident
    heap.malloc(3, 32 * KiB)  # best fit: inside the freed chunk
    assert heap.resident == resident


def test_top_is_trimmed_back_to_the_pad() -> None:
    heap = GlibcHeap()
    handles = list(range(8))
    for h in handles:
        heap.malloc(h, 100 * KiB)  # under the 128 KiB threshold: heap
    assert heap.resident > 700 * KiB
    for h in reversed(handles):
        heap.free(h)
    assert heap.resident < heap.trim_threshold  # what is left never reached the threshold
    assert heap.resident >= DEFAULT_TOP_PAD


def test_random_sequences_keep_the_heap_consistent() -> None:
    import random

    rng = random.Random(0)
    heap = GlibcHeap()
    live: list[int] = []
    for handle in range(3000):
        if live and rng.random() < 0.45:
            heap.free(live.pop(rng.randrange(len(live))))
        else:
            heap.malloc(handle, rng.choice([8, 200, 3000, 70_000, 300_000, 5_000_000]))
            live.append(handle)
        assert heap.resident >= 0
    for handle in live:
        heap.free(handle)
    assert heap.allocated == 0
    assert heap.mapped_bytes == 0
