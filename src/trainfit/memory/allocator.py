"""A replay of PyTorch's CUDA caching allocator (native backend, default settings).

Given the sizes of tensor allocations and frees in program order, it reproduces what
c10/cuda/CUDACachingAllocator.cpp does with them: rounding, the small and large pools, the
segment sizes it asks cudaMalloc for, best-fit block search, splitting and coalescing, so that
peak *reserved* memory is simulated rather than guessed as a multiple of allocated memory.

Constants and rules (PyTorch 2.x, `PYTORCH_CUDA_ALLOC_CONF` unset):
- requests round up to a multiple of 512 bytes (kMinBlockSize);
- requests of at most 1 MiB (kSmallSize) use the small pool, carved from 2 MiB segments
  (kSmallBuffer); larger ones the large pool, from 20 MiB segments (kLargeBuffer) when under
  10 MiB (kMinLargeAlloc), else a segment of the request rounded up to 2 MiB (kRoundLarge);
- a free block is found best-fit (smallest size, then lowest address);
- a block is split when the rest is at least 512 bytes (small pool) or more than 1 MiB (large);
- a freed block merges with free neighbours of its segment; segments are not released except
  by the out-of-memory retry: when a device `capacity` is given and a new segment would not
  fit in it, every cached segment that is entirely free is released (`release_cached_blocks`,
  as the native allocator does with `max_split_size` unset) and the segment is tried again;
  if it still does not fit, `OutOfMemory` is raised.

Known limitations: one stream only (no cross-stream events); expandable segments,
`max_split_size_mb`, `roundup_power2_divisions` and garbage-collection thresholds are not
modelled; cudaMalloc addresses are taken to grow monotonically, which only matters for ties.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_LARGE_BUFFER = 20 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20


def round_size(size: int) -> int:
    """The block size a request of `size` bytes occupies."""
    if size < K_MIN_BLOCK:
        return K_MIN_BLOCK
    return K_MIN_BLOCK * ((size + K_MIN_BLOCK - 1) // K_MIN_BLOCK)


def segment_size(size: int) -> int:
    """The cudaMalloc size the allocator asks for when no cached block fits `size`."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) // K_ROUND_LARGE)


@dataclass(slots=True, eq=False)
class _Block:
    addr: int
    size: int
    small: bool
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None
    name: object = None
    """What `CachingAllocator.run` counts the block's bytes under while it is allocated."""


_ADDRESS_BITS = 64
"""A free block's pool key is `size << 64 | addr`: one int that sorts as (size, addr) does
(addresses stay far below 2**64), compared faster than a tuple."""


@dataclass(slots=True)
class _Pool:
    # free blocks as sorted `size << 64 | addr` keys, and the blocks by key
    keys: list[int] = field(default_factory=list)
    blocks: dict[int, _Block] = field(default_factory=dict)

    def insert(self, block: _Block) -> None:
        key = block.size << _ADDRESS_BITS | block.addr
        bisect.insort(self.keys, key)
        self.blocks[key] = block

    def remove(self, block: _Block) -> None:
        key = block.size << _ADDRESS_BITS | block.addr
        del self.keys[bisect.bisect_left(self.keys, key)]
        del self.blocks[key]

    def best_fit(self, size: int) -> _Block | None:
        """The smallest free block of at least `size` bytes, the lowest address first."""
        keys = self.keys
        index = bisect.bisect_left(keys, size << _ADDRESS_BITS)
        if index == len(keys):
            return None
        return self.blocks[keys[index]]


@dataclass(frozen=True, slots=True)
class RunMarks:
    """What `CachingAllocator.run` reads a step's third field as, beside a name."""

    free: object
    """The step frees its key's allocation."""
    workspace: object
    """A library workspace of `workspace_bytes` is allocated."""
    workspace_bytes: int
    workspace_name: str
    """The name the workspaces' bytes are counted under."""


class Stepped(Protocol):
    """An allocator replayed a `malloc` or `free` at a time."""

    allocated: int

    def malloc(self, handle: int, size: int) -> int: ...

    def free(self, handle: int) -> None: ...


def run_stepwise(
    alloc: Stepped,
    steps: Iterable[tuple[int, int, object]],
    nbytes: Sequence[int],
    marks: RunMarks,
) -> tuple[int, dict[str, int]]:
    """`CachingAllocator.run` for any allocator, a `malloc` or `free` per step."""
    held: dict[int, tuple[int, str]] = {}
    live: dict[str, int] = {}
    best, best_at, best_live = -1, -1, {}
    handle = -1
    for position, key, what in steps:
        if what is marks.free:
            got = held.pop(key, None)
            if got is not None:
                alloc.free(key)
                live[got[1]] -= got[0]
        elif what is marks.workspace:
            got_bytes = alloc.malloc(handle, marks.workspace_bytes)
            live[marks.workspace_name] = live.get(marks.workspace_name, 0) + got_bytes
            handle -= 1
        elif nbytes[position]:
            assert isinstance(what, str)
            size = alloc.malloc(key, nbytes[position])
            held[key] = (size, what)
            live[what] = live.get(what, 0) + size
            if alloc.allocated > best:
                best, best_at, best_live = alloc.allocated, position, dict(live)
    return best_at, best_live


class OutOfMemory(Exception):
    """A replayed request did not fit the capacity even after releasing cached segments."""


class CachingAllocator:
    """Replays allocations and frees; tracks allocated and reserved bytes and their peaks."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        """Bytes cudaMalloc can hand out (None: unlimited)."""
        self.retries = 0
        """How many times the out-of-memory retry released cached segments."""
        self._pools = {True: _Pool(), False: _Pool()}
        self._live: dict[int, _Block] = {}
        self._next_addr = 1 << 32
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.segments = 0

    def malloc(self, handle: int, size: int) -> int:
        """Allocate `size` bytes for `handle` (a key unique while it lives); return the size of
        the block it got (a large block whose remainder is too small to split is used whole)."""
        if size <= 0:
            return 0  # NB: CUDA returns nullptr for empty tensors without touching the pool
        # NB: round_size, Pool.best_fit/remove/insert written out: a plan replays millions
        size = round_size(size)
        small = size <= K_SMALL_SIZE
        pool = self._pools[small]
        keys, blocks = pool.keys, pool.blocks
        index = bisect.bisect_left(keys, size << _ADDRESS_BITS)
        block = blocks.pop(keys.pop(index)) if index < len(keys) else self._segment(size, small)
        rest = block.size - size
        if (small and rest >= K_MIN_BLOCK) or (not small and rest > K_SMALL_SIZE):
            after = block.next
            tail = _Block(addr=block.addr + size, size=rest, small=small, prev=block, next=after)
            if after is not None:
                after.prev = tail
            block.next = tail
            block.size = size
            key = rest << _ADDRESS_BITS | tail.addr
            bisect.insort(keys, key)
            blocks[key] = tail
        block.free = False
        self._live[handle] = block
        self.allocated += block.size
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
        return block.size

    def free(self, handle: int) -> None:
        """Return the block of `handle` to its pool, merging with free neighbours."""
        block = self._live.pop(handle, None)
        if block is None:
            return
        self.allocated -= block.size
        block.free = True
        pool = self._pools[block.small]
        keys, blocks = pool.keys, pool.blocks
        before, after = block.prev, block.next
        if before is not None and before.free:
            key = before.size << _ADDRESS_BITS | before.addr
            del keys[bisect.bisect_left(keys, key)]
            del blocks[key]
            before.size += block.size
            before.next = after
            if after is not None:
                after.prev = before
            block = before
        if after is not None and after.free:
            key = after.size << _ADDRESS_BITS | after.addr
            del keys[bisect.bisect_left(keys, key)]
            del blocks[key]
            block.size += after.size
            block.next = after.next
            if after.next is not None:
                after.next.prev = block
        key = block.size << _ADDRESS_BITS | block.addr
        bisect.insort(keys, key)
        blocks[key] = block

    def run(
        self, steps: Iterable[tuple[int, int, object]], nbytes: Sequence[int], marks: RunMarks
    ) -> tuple[int, dict[str, int]]:
        """Replay `steps`, counting the bytes allocated by name; return the position of the
        allocation after which the allocated bytes first reached their highest, and the bytes
        by name just then ((-1, {}) where nothing was). A step is (position, key, what): `what`
        a name for an allocation of `nbytes[position]` bytes (none where 0), or one of `marks`.
        `malloc` and `free` step by step (`run_stepwise`), written out: a plan replays millions
        (the same state and results, tests/memory)."""
        if min(nbytes, default=0) < 0:  # NB: malloc's no-op for those; not met in traces
            return run_stepwise(self, steps, nbytes, marks)
        free_mark, workspace_mark = marks.free, marks.workspace
        pools = {small: (pool.keys, pool.blocks) for small, pool in self._pools.items()}
        insort, bisect_left, new_block = bisect.insort, bisect.bisect_left, _Block
        held: dict[int, _Block] = {}
        live: dict[str, int] = {}
        best, best_at, best_live, handle = -1, -1, {}, -1
        allocated, peak = self.allocated, self.peak_allocated
        try:
            for position, key, what in steps:
                if what is free_mark:
                    block = held.pop(key, None)
                    if block is None:
                        continue
                    size = block.size
                    live[block.name] -= size  # type: ignore[index]
                    allocated -= size
                    block.free = True
                    keys, blocks = pools[block.small]
                    before, after = block.prev, block.next
                    if before is not None and before.free:
                        del blocks[keys.pop(bisect_left(keys, before.size << 64 | before.addr))]
                        before.size += size
                        before.next = after
                        if after is not None:
                            after.prev = before
                        block = before
                    if after is not None and after.free:
                        del blocks[keys.pop(bisect_left(keys, after.size << 64 | after.addr))]
                        block.size += after.size
                        block.next = after = after.next
                        if after is not None:
                            after.prev = block
                    insort(keys, k := block.size << 64 | block.addr)
                    blocks[k] = block
                elif what is workspace_mark:  # NB: rare, through malloc; never freed
                    self.allocated, self.peak_allocated = allocated, peak
                    got = self.malloc(handle, marks.workspace_bytes)
                    allocated, peak, handle = self.allocated, self.peak_allocated, handle - 1
                    live[marks.workspace_name] = live.get(marks.workspace_name, 0) + got
                elif n := nbytes[position]:
                    size = 512 if n < 512 else (n + 511) & -512  # NB: round_size
                    small = size <= 1048576  # NB: K_SMALL_SIZE
                    keys, blocks = pools[small]
                    index = bisect_left(keys, size << 64)
                    if index < len(keys):
                        block = blocks.pop(keys.pop(index))
                    else:
                        block = self._segment(size, small)
                    rest = block.size - size
                    if rest > 1048576 or (small and rest >= 512):  # NB: as in malloc
                        after = block.next
                        tail = new_block(block.addr + size, rest, small, True, block, after)
                        if after is not None:
                            after.prev = tail
                        block.next = tail
                        block.size = size
                        insort(keys, k := rest << 64 | tail.addr)
                        blocks[k] = tail
                    block.free, block.name, held[key] = False, what, block
                    allocated += block.size
                    if allocated > peak:
                        peak = allocated
                    live[what] = live.get(what, 0) + block.size  # type: ignore[index]
                    if allocated > best:
                        best, best_at, best_live = allocated, position, dict(live)
        finally:  # NB: as `malloc` leaves them, an OutOfMemory included
            self.allocated, self.peak_allocated = allocated, peak
        return best_at, best_live

    def _segment(self, size: int, small: bool) -> _Block:
        """A new segment for a rounded request of `size` bytes that no cached block fits."""
        seg = segment_size(size)
        if self.capacity is not None and self.reserved + seg > self.capacity:
            self._release_cached_segments()
            if self.reserved + seg > self.capacity:
                raise OutOfMemory(
                    f"{seg} bytes more do not fit: {self.reserved} of {self.capacity} "
                    "reserved after releasing the cached segments"
                )
        block = _Block(addr=self._next_addr, size=seg, small=small)
        self._next_addr += seg + K_ROUND_LARGE  # NB: segments are never adjacent
        self.reserved += seg
        self.segments += 1
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved
        return block

    def _release_cached_segments(self) -> None:
        """Release every segment that is one free block (the native out-of-memory retry)."""
        self.retries += 1
        for pool in self._pools.values():
            whole = [b for b in pool.blocks.values() if b.prev is None and b.next is None]
            for block in whole:
                pool.remove(block)
                self.reserved -= block.size
                self.segments -= 1
