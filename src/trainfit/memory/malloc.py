"""A replay of glibc malloc as PyTorch's CPU allocator uses it, for resident memory.

PyTorch's CPU tensors come from `posix_memalign(64, n)` (c10/core/impl/alloc_cpu.cpp) and go
back with `free`: there is no caching allocator. What the process holds (its resident set)
then depends on glibc's malloc (malloc/malloc.c, glibc 2.26+, defaults, main arena):

- a request becomes a chunk of `n + 8` bytes rounded up to 16 (at least 32); posix_memalign
  (glibc < 2.38) asks for that plus 64 + 32 bytes, takes the 64-byte aligned part and gives
  the leader and the tail back;
- free chunks are reused first (modelled as best fit, lowest address on ties), then the top
  chunk (the free end of the heap) is split;
- only when neither fits does a request of at least the *mmap threshold* get its own mmap
  (returned to the OS on free); smaller ones extend the heap with `sbrk` (plus a 128 KiB pad);
- the mmap threshold starts at 128 KiB and is raised to the size of any mmapped chunk that is
  freed (up to 32 MiB), and the trim threshold to twice that (M_MMAP_THRESHOLD's dynamic rule);
- freed heap chunks merge with free neighbours; when a free of at least 64 KiB leaves a top
  chunk of at least the trim threshold, the heap shrinks back to a 128 KiB pad (`systrim`);
  free chunks below the top stay resident;
- resident heap memory is every page below the highest byte ever handed out (and not trimmed
  since): pages are resident once written, and a freed chunk's pages stay written.

Checked on the real allocation sequence of a gpt2 training step (PyTorch profiler, 13,299
events, 2 iterations): replayed here, peak resident 2296.8 MiB; replayed through the real
glibc 2.36 (posix_memalign, memset, free; VmHWM), 2292.9 MiB.

Known limitations: tcache and fastbins (which do not merge small chunks at once) are treated as
ordinary free chunks; allocations by other threads (OpenMP workers, which get their own arenas)
and by Python objects, oneDNN and autograd nodes are not in the replay, so they neither take
memory nor pin the top of the heap; the 64-byte alignment slack is ignored for heap chunks;
pages are taken to be 4 KiB and every allocated byte to be written.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

PAGE = 4096
SIZE_SZ = 8
MALLOC_ALIGNMENT = 16
MINSIZE = 32
TORCH_ALIGNMENT = 64
"""c10's gAlignment for CPU tensors."""
DEFAULT_MMAP_THRESHOLD = 128 << 10
DEFAULT_MMAP_THRESHOLD_MAX = 32 << 20
"""On 64-bit builds: 4 * 1024 * 1024 * sizeof(long)."""
DEFAULT_TOP_PAD = 128 << 10
FASTBIN_CONSOLIDATION_THRESHOLD = 64 << 10


def chunk_size(request: int) -> int:
    """The heap chunk a request of `request` bytes occupies (glibc's request2size)."""
    size = (request + SIZE_SZ + MALLOC_ALIGNMENT - 1) & ~(MALLOC_ALIGNMENT - 1)
    return max(size, MINSIZE)


def mmap_size(request: int) -> int:
    """The mapping posix_memalign(64, request) gets when it is served by mmap.

    _int_memalign asks _int_malloc for nb + alignment + MINSIZE bytes; sysmalloc maps that plus
    one size field, rounded up to a page.
    """
    nb = chunk_size(request) + TORCH_ALIGNMENT + MINSIZE
    return _page_up(nb + SIZE_SZ)


def _page_up(size: int) -> int:
    return (size + PAGE - 1) // PAGE * PAGE


@dataclass(slots=True, eq=False)
class _Chunk:
    addr: int
    size: int
    free: bool = True
    prev: _Chunk | None = None
    next: _Chunk | None = None


@dataclass(slots=True)
class _Bins:
    """Free chunks below the top, by (size, addr) for best fit."""

    keys: list[tuple[int, int]] = field(default_factory=list)
    chunks: dict[tuple[int, int], _Chunk] = field(default_factory=dict)

    def insert(self, chunk: _Chunk) -> None:
        key = (chunk.size, chunk.addr)
        bisect.insort(self.keys, key)
        self.chunks[key] = chunk

    def remove(self, chunk: _Chunk) -> None:
        key = (chunk.size, chunk.addr)
        del self.keys[bisect.bisect_left(self.keys, key)]
        del self.chunks[key]

    def best_fit(self, size: int) -> _Chunk | None:
        index = bisect.bisect_left(self.keys, (size, -1))
        return self.chunks[self.keys[index]] if index < len(self.keys) else None


class GlibcHeap:
    """Replays malloc/free of tensor storages; tracks requested and resident bytes and peaks."""

    def __init__(self) -> None:
        self._bins = _Bins()
        self._top = _Chunk(addr=0, size=0)
        self._brk = 0
        self._touched = 0
        """Highest heap address ever handed out (and still below brk)."""
        self._live: dict[int, _Chunk] = {}
        self._mapped: dict[int, int] = {}
        self.mmap_threshold = DEFAULT_MMAP_THRESHOLD
        self.trim_threshold = 2 * DEFAULT_MMAP_THRESHOLD
        self.allocated = 0
        self.mapped_bytes = 0
        self.peak_allocated = 0
        self.peak_resident = 0
        self._requested: dict[int, int] = {}

    @property
    def resident(self) -> int:
        """Resident bytes: written heap pages plus live mappings."""
        return _page_up(self._touched) + self.mapped_bytes

    def malloc(self, handle: int, request: int) -> None:
        """Allocate `request` bytes for `handle` (a key unique while it lives)."""
        if request <= 0:
            return  # NB: c10 hands out no memory for empty tensors
        nb = chunk_size(request)
        # NB: _int_memalign (glibc < 2.38) asks _int_malloc for the worst case, so a hole left
        # by a freed tensor of the same size does not fit the next one
        padded = nb + TORCH_ALIGNMENT + MINSIZE
        chunk = self._bins.best_fit(padded)
        if chunk is not None:
            self._bins.remove(chunk)
            self._split(chunk, padded, into_bins=True)
        elif self._top.size >= padded + MINSIZE:
            chunk = self._from_top(padded)
        elif padded >= self.mmap_threshold:
            size = mmap_size(request)
            self._mapped[handle] = size
            self.mapped_bytes += size
            chunk = None
        else:
            self._grow(padded)
            chunk = self._from_top(padded)
        if chunk is not None:
            chunk.free = False
            chunk = self._align(chunk, nb)
            chunk.free = False
            self._live[handle] = chunk
            self._touched = max(self._touched, chunk.addr + chunk.size)
        self._requested[handle] = request
        self.allocated += request
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_resident = max(self.peak_resident, self.resident)

    def free(self, handle: int) -> None:
        """Free the memory of `handle`."""
        request = self._requested.pop(handle, None)
        if request is None:
            return
        self.allocated -= request
        if handle in self._mapped:
            size = self._mapped.pop(handle)
            self.mapped_bytes -= size
            if self.mmap_threshold < size <= DEFAULT_MMAP_THRESHOLD_MAX:
                self.mmap_threshold = size
                self.trim_threshold = 2 * size
            return
        chunk = self._live.pop(handle)
        freed = chunk.size
        chunk.free = True
        chunk = self._merge(chunk)
        if chunk is not self._top:
            self._bins.insert(chunk)
        elif freed >= FASTBIN_CONSOLIDATION_THRESHOLD and self._top.size >= self.trim_threshold:
            self._trim()

    # -- heap mechanics -----------------------------------------------------------------

    def _split(self, chunk: _Chunk, nb: int, into_bins: bool) -> None:
        rest = chunk.size - nb
        if rest < MINSIZE:
            return
        tail = _Chunk(addr=chunk.addr + nb, size=rest, prev=chunk, next=chunk.next)
        if chunk.next is not None:
            chunk.next.prev = tail
        chunk.next = tail
        chunk.size = nb
        if into_bins:
            self._bins.insert(tail)

    def _align(self, chunk: _Chunk, nb: int) -> _Chunk:
        """Give back the leader before the first 64-byte aligned address and the spare tail."""
        lead = -(chunk.addr + 2 * SIZE_SZ) % TORCH_ALIGNMENT
        if 0 < lead < MINSIZE:
            lead += TORCH_ALIGNMENT
        if lead:
            self._split(chunk, lead, into_bins=False)
            rest = chunk.next
            assert rest is not None
            rest.free = False
            self._release(chunk)
            chunk = rest
        if chunk.size > nb + MINSIZE:
            self._split(chunk, nb, into_bins=False)
            assert chunk.next is not None
            self._release(chunk.next)
        return chunk

    def _release(self, chunk: _Chunk) -> None:
        # NB: small leftovers go to tcache or fastbins in glibc, merged later; merged at once here
        chunk.free = True
        merged = self._merge(chunk)
        if merged is not self._top:
            self._bins.insert(merged)

    def _from_top(self, nb: int) -> _Chunk:
        top = self._top
        chunk = _Chunk(addr=top.addr, size=nb, prev=top.prev, next=top)
        if top.prev is not None:
            top.prev.next = chunk
        top.prev = chunk
        top.addr += nb
        top.size -= nb
        return chunk

    def _grow(self, nb: int) -> None:
        # NB: sysmalloc asks sbrk for nb + top_pad + MINSIZE, less what top already holds
        extra = _page_up(nb + DEFAULT_TOP_PAD + MINSIZE - self._top.size)
        self._brk += extra
        self._top.size += extra

    def _merge(self, chunk: _Chunk) -> _Chunk:
        prev, nxt = chunk.prev, chunk.next
        if prev is not None and prev.free:
            self._bins.remove(prev)
            prev.size += chunk.size
            prev.next = nxt
            if nxt is not None:
                nxt.prev = prev
            chunk = prev
        nxt = chunk.next
        if nxt is self._top:
            self._top.addr = chunk.addr
            self._top.size += chunk.size
            self._top.prev = chunk.prev
            if chunk.prev is not None:
                chunk.prev.next = self._top
            return self._top
        if nxt is not None and nxt.free:
            self._bins.remove(nxt)
            chunk.size += nxt.size
            chunk.next = nxt.next
            if nxt.next is not None:
                nxt.next.prev = chunk
        return chunk

    def _trim(self) -> None:
        # systrim: keep top_pad (and MINSIZE) of the top, give the rest back in whole pages
        extra = (self._top.size - DEFAULT_TOP_PAD - MINSIZE - 1) // PAGE * PAGE
        if extra <= 0:
            return
        self._brk -= extra
        self._top.size -= extra
        self._touched = min(self._touched, self._brk)
