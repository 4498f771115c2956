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


def _stream(seed: int) -> tuple[list[tuple[int, int, object]], list[int]]:
    """Random steps for `CachingAllocator.run`: sizes of every pool and rounding case, frees of
    live and unknown keys, a live key allocated again, zero bytes, workspaces."""
    import random

    rng = random.Random(seed)
    steps: list[tuple[int, int, object]] = []
    nbytes: list[int] = []
    live: list[int] = []
    for position in range(3000):
        roll = rng.random()
        if roll < 0.4 and live:
            steps.append((position, live.pop(rng.randrange(len(live))), "free"))
        elif roll < 0.42:
            steps.append((position, rng.randrange(10_000, 10_010), "free"))  # never allocated
        elif roll < 0.43:
            steps.append((position, 0, "workspace"))
        else:
            key = rng.choice(live) if roll < 0.45 and live else 100_000 + position
            live.append(key)
            steps.append((position, key, rng.choice(("weights", "activations"))))
        nbytes.append(
            rng.choice(
                (0, 1, 511, 512, 513, rng.randrange(1, MiB + 2), rng.randrange(MiB, 12 * MiB))
            )
            if rng.random() < 0.9
            else rng.randrange(12 * MiB, 64 * MiB)
        )
    return steps, nbytes


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("capacity", [None, 600 * MiB, 300 * MiB, 150 * MiB])
def test_run_equals_a_malloc_or_free_per_step(seed: int, capacity: int | None) -> None:
    from trainfit.memory.allocator import OutOfMemory, RunMarks, run_stepwise

    steps, nbytes = _stream(seed)
    marks = RunMarks("free", "workspace", 3 * MiB + 5, "workspaces")
    outcomes = []
    for fast in (True, False):
        alloc = CachingAllocator(capacity)
        try:
            got: object = alloc.run(steps, nbytes, marks) if fast else None
            if not fast:
                got = run_stepwise(alloc, steps, nbytes, marks)
        except OutOfMemory as exc:
            got = f"out of memory: {exc}"
        pools = [(p.keys, sorted(p.blocks)) for p in alloc._pools.values()]
        counts = (alloc.peak_allocated, alloc.peak_reserved, alloc.segments, alloc.retries)
        outcomes.append((got, counts, pools, alloc.reserved))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1][0] > 0  # NB: something was allocated


def test_run_with_negative_bytes_is_stepwise() -> None:
    from trainfit.memory.allocator import RunMarks, run_stepwise

    steps = [(0, 1, "weights"), (1, 2, "weights"), (2, 1, "free"), (3, 2, "free")]
    nbytes = [-5, 4 * MiB, 0, 0]
    marks = RunMarks("free", "workspace", 0, "workspaces")
    assert CachingAllocator().run(steps, nbytes, marks) == run_stepwise(
        CachingAllocator(), steps, nbytes, marks
    )
