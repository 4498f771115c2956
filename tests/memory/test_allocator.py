"""The caching-allocator replay against PyTorch's documented rules."""

import pytest

from trainfit.memory.allocator import (
    K_LARGE_BUFFER,
    K_SMALL_BUFFER,
    CachingAllocator,
    round_size,
    segment_size,
)

MiB = 1 << 20


def test_rounding_and_segment_sizes() -> None:
    assert round_size(1) == 512
    assert round_size(513) == 1024
    assert segment_size(1 * MiB) == K_SMALL_BUFFER
    assert segment_size(1 * MiB + 512) == K_LARGE_BUFFER
    assert segment_size(10 * MiB) == 10 * MiB
    assert segment_size(10 * MiB + 1) == 12 * MiB


def test_small_blocks_share_a_segment() -> None:
    a = CachingAllocator()
    for handle in range(4):
        a.malloc(handle, 1000)
    assert a.reserved == K_SMALL_BUFFER
    assert a.allocated == 4 * 1024


def test_freed_block_is_reused_best_fit() -> None:
    a = CachingAllocator()
    a.malloc(1, 4 * MiB)  # a 20 MiB segment, split into 4 used + 16 free
    a.malloc(2, 18 * MiB)  # the 16 MiB block is too small: an 18 MiB segment
    a.free(2)
    a.malloc(3, 15 * MiB)  # best fit is the 16 MiB block; 1 MiB left is not split off
    assert a.reserved == K_LARGE_BUFFER + 18 * MiB
    assert a.allocated == 4 * MiB + 16 * MiB
    assert a.peak_allocated == 22 * MiB


def test_large_blocks_split_only_above_one_mib() -> None:
    a = CachingAllocator()
    a.malloc(1, 12 * MiB)
    a.free(1)
    a.malloc(2, int(11.5 * MiB))  # remainder 0.5 MiB: not split, the whole block is used
    assert a.allocated == 12 * MiB


def test_coalescing_restores_a_whole_segment() -> None:
    a = CachingAllocator()
    a.malloc(1, 4 * MiB)
    a.malloc(2, 4 * MiB)
    a.free(1)
    a.free(2)
    a.malloc(3, 20 * MiB)  # the merged 20 MiB block serves it: no new segment
    assert a.reserved == K_LARGE_BUFFER
    assert a.segments == 1


def test_reserved_never_shrinks_and_zero_bytes_are_free() -> None:
    a = CachingAllocator()
    a.malloc(1, 0)
    assert a.reserved == 0
    a.malloc(2, 64 * MiB)
    a.free(2)
    assert a.reserved == 64 * MiB
    assert a.allocated == 0
    assert a.peak_reserved == 64 * MiB


def test_out_of_memory_retry_releases_cached_segments() -> None:
    from trainfit.memory.allocator import OutOfMemory

    alloc = CachingAllocator(capacity=100 << 20)
    alloc.malloc(1, 60 << 20)
    alloc.free(1)  # a free 60 MiB segment stays cached
    alloc.malloc(2, 50 << 20)  # fits in the cached segment (best fit, split)
    alloc.free(2)
    alloc.malloc(3, 70 << 20)  # needs a new segment: 60 + 70 > 100, so the cache is released
    assert alloc.retries == 1 and alloc.reserved == 70 << 20
    with pytest.raises(OutOfMemory):
        alloc.malloc(4, 40 << 20)  # 70 live + 40 > 100 with nothing cached to release
