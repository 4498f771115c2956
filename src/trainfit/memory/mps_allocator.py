"""A replay of PyTorch's MPS allocator (Apple GPUs): Metal heaps and the buffers cut from them.

Modelled from aten/src/ATen/mps/MPSAllocator.{h,mm} (pytorch/pytorch@57ba4129, read on
2026-11-26; sources in docs/apple-mps.md). No Apple GPU was available to check it: every
figure it produces is labelled modelled.

Rules (default settings, private storage, unified memory, no memory pressure):
- a request is aligned up to the 16 KiB page of Apple silicon (Metal's
  `heapBufferSizeAndAlignWithLength` decides the real alignment; the page is assumed);
- requests of at most 1 MiB (kMaxSmallAlloc) use the small pool, larger ones the large pool;
- a freed buffer stays cached in its pool. A request takes the smallest cached buffer at least
  as large, whole, when it is at most 32 MiB (kLargeHeap) larger; a larger one stays cached when
  some heap has room for the request, else it is released into its heap to make that room
  (`get_free_buffer`);
- otherwise a buffer is cut from the heap with the least room that still holds it (Metal places
  it; first fit within the heap is assumed); a new heap is made when none can: 8 MiB
  (kSmallHeap) for small requests, 32 MiB (kLargeHeap) under 10 MiB (kMinLargeAlloc), 1 GiB
  (kXLargeHeapU) under 512 MiB, else a heap of its own rounded up to 2 MiB (kRoundLarge);
- reserved memory is the sum of the heaps (the "MPS allocated" of PyTorch's error message);
- with a `capacity`, a request is refused while the heaps plus the request exceed it, even one
  a cached buffer could serve, as PyTorch refuses past its high watermark; the allocator then
  releases cached buffers (just enough, then all), drops heaps left empty and tries again, and
  `OutOfMemory` is raised when it still fails.

Known limitations: Metal's own placement inside a heap, the MPSGraph framework's buffers (which
`torch.mps.driver_allocated_memory()` counts beside the heaps) and the low-watermark garbage
collection (at 1.4 times the working-set limit) are not modelled.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from trainfit.memory.allocator import OutOfMemory

MiB = 1 << 20
PAGE = 16 << 10
K_MAX_SMALL_ALLOC = 1 * MiB
K_MIN_LARGE_ALLOC = 10 * MiB
K_ROUND_LARGE = 2 * MiB
K_SMALL_HEAP = 8 * MiB
K_LARGE_HEAP = 32 * MiB
K_XLARGE_HEAP = 1024 * MiB


def buffer_size(size: int) -> int:
    """The bytes a request of `size` takes in its heap (page-aligned)."""
    return PAGE * ((size + PAGE - 1) // PAGE)


def heap_size(size: int) -> tuple[int, bool]:
    """The heap made for a buffer of `size` bytes when no heap has room, and whether other
    buffers may share it (`HeapBlock::createHeapBlock`)."""
    if size <= K_MAX_SMALL_ALLOC:
        return K_SMALL_HEAP, True
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_HEAP, True
    if size < K_XLARGE_HEAP // 2:
        return K_XLARGE_HEAP, True
    return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) // K_ROUND_LARGE), False


@dataclass(slots=True, eq=False)
class _Heap:
    size: int
    ident: int
    shared: bool
    """False: a heap of one buffer (no other buffer is cut from what its rounding leaves)."""
    free: list[tuple[int, int]] = field(default_factory=list)
    """Free extents (offset, length), by offset."""
    buffers: int = 0

    def room(self) -> int:
        """The largest buffer the heap can still hold (`maxAvailableSizeWithAlignment`)."""
        return max((length for _, length in self.free), default=0)

    def cut(self, size: int) -> int:
        if not self.shared:
            self.free.clear()
            self.buffers += 1
            return 0
        for i, (offset, length) in enumerate(self.free):
            if length >= size:
                if length == size:
                    del self.free[i]
                else:
                    self.free[i] = (offset + size, length - size)
                self.buffers += 1
                return offset
        raise AssertionError("cut() called on a heap without room")

    def give_back(self, offset: int, size: int) -> None:
        if not self.shared:
            self.free = [(0, self.size)]
            self.buffers -= 1
            return
        i = bisect.bisect_left(self.free, (offset, 0))
        self.free.insert(i, (offset, size))
        if i + 1 < len(self.free) and offset + size == self.free[i + 1][0]:
            self.free[i] = (offset, size + self.free[i + 1][1])
            del self.free[i + 1]
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == offset:
            self.free[i - 1] = (self.free[i - 1][0], self.free[i - 1][1] + self.free[i][1])
            del self.free[i]
        self.buffers -= 1


@dataclass(slots=True, eq=False)
class _Buffer:
    size: int
    heap: _Heap
    offset: int
    order: int


class _Pool:
    def __init__(self) -> None:
        self.heaps: list[_Heap] = []
        self.cached: list[tuple[int, int, _Buffer]] = []
        """Cached buffers as (size, order, buffer), sorted: the smallest that fits comes first."""

    def smallest_cached(self, size: int) -> _Buffer | None:
        i = bisect.bisect_left(self.cached, (size, -1))
        return self.cached[i][2] if i < len(self.cached) else None

    def uncache(self, buffer: _Buffer) -> None:
        i = bisect.bisect_left(self.cached, (buffer.size, buffer.order))
        del self.cached[i]

    def heap_with_room(self, size: int) -> _Heap | None:
        fitting = [h for h in self.heaps if h.room() >= size]
        return min(fitting, key=lambda h: (h.room(), h.ident)) if fitting else None


class MpsAllocator:
    """Replays allocations and frees through the MPS heap allocator; same interface as
    `CachingAllocator` (reserved is the heaps' total)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self.retries = 0
        self._pools = {True: _Pool(), False: _Pool()}
        self._live: dict[int, _Buffer] = {}
        self._order = 0
        self._heaps_made = 0
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.segments = 0
        """Heaps held."""

    def malloc(self, handle: int, size: int) -> int:
        """Allocate `size` bytes for `handle`; return the bytes of the buffer it got."""
        if size <= 0:
            return 0
        size = buffer_size(size)
        pool = self._pools[size <= K_MAX_SMALL_ALLOC]
        buffer = self._from_cache(pool, size) or self._new_buffer(pool, size)
        if buffer is None:
            buffer = self._after_release(pool, size)
        self._live[handle] = buffer
        self.allocated += buffer.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return buffer.size

    def free(self, handle: int) -> None:
        """Return the buffer of `handle` to its pool's cache (its heap keeps it)."""
        buffer = self._live.pop(handle, None)
        if buffer is None:
            return
        self.allocated -= buffer.size
        pool = self._pools[buffer.size <= K_MAX_SMALL_ALLOC]
        bisect.insort(pool.cached, (buffer.size, buffer.order, buffer))

    def _over(self, size: int) -> bool:
        return self.capacity is not None and self.reserved + size > self.capacity

    def _from_cache(self, pool: _Pool, size: int) -> _Buffer | None:
        # NB: PyTorch checks the high watermark before reusing a cached buffer too
        if self._over(size):
            return None
        cached = pool.smallest_cached(size)
        if cached is None:
            return None
        pool.uncache(cached)
        if cached.size <= size + K_LARGE_HEAP:
            return cached
        if pool.heap_with_room(size) is not None:
            # NB: an oversized buffer stays cached while a heap can hold the request
            bisect.insort(pool.cached, (cached.size, cached.order, cached))
        else:  # its space goes back to its heap, where the request is cut next
            self._release(pool, cached, drop_empty_heap=False)
        return None

    def _new_buffer(self, pool: _Pool, size: int) -> _Buffer | None:
        if self._over(size):
            return None
        heap = pool.heap_with_room(size)
        if heap is None:
            total, shared = heap_size(size)
            self._heaps_made += 1
            heap = _Heap(size=total, ident=self._heaps_made, shared=shared, free=[(0, total)])
            pool.heaps.append(heap)
            self.reserved += total
            self.segments += 1
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        self._order += 1
        return _Buffer(size=size, heap=heap, offset=heap.cut(size), order=self._order)

    def _release(self, pool: _Pool, buffer: _Buffer, drop_empty_heap: bool) -> None:
        heap = buffer.heap
        heap.give_back(buffer.offset, buffer.size)
        if drop_empty_heap and heap.buffers == 0:
            pool.heaps.remove(heap)
            self.reserved -= heap.size
            self.segments -= 1

    def _after_release(self, pool: _Pool, size: int) -> _Buffer:
        """The out-of-memory path: release enough cached buffers, then all, and retry."""
        self.retries += 1
        if pool.cached:
            i = bisect.bisect_left(pool.cached, (size, -1))
            if i < len(pool.cached):
                victims = [pool.cached[i][2]]
            else:  # NB: the largest first, until their sizes add up to the request
                victims, total = [], 0
                for _, _, buffer in reversed(pool.cached):
                    victims.append(buffer)
                    total += buffer.size
                    if total >= size:
                        break
            for buffer in victims:
                pool.uncache(buffer)
                self._release(pool, buffer, drop_empty_heap=True)
            found = self._new_buffer(pool, size)
            if found is not None:
                return found
        for other in self._pools.values():
            for _, _, buffer in list(other.cached):
                self._release(other, buffer, drop_empty_heap=True)
            other.cached.clear()
        found = self._new_buffer(pool, size)
        if found is None:
            raise OutOfMemory(
                f"{size} bytes more do not fit: {self.reserved} of {self.capacity} bytes of "
                "heaps held after releasing the cached buffers"
            )
        return found
