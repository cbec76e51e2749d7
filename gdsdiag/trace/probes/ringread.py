"""The events ring buffer read straight from its memory map, many records per step.

bcc hands each ring-buffer record to a Python callback through ctypes: ~2-3 µs per record here
(bcc's wrapper, the callback, ``ctypes.string_at``), a fifth of the trace's Python cost per event.
The kernel's BPF ring buffer is a shared mapping (kernel/bpf/ringbuf.c, as libbpf reads it): a
consumer page (consumer position, ours to write), then a producer page (producer position) and the
data area mapped twice in a row, so a run of records that wraps around is one contiguous slice.
Each record is an 8-byte header (length, with a busy bit while the program is writing it) and the
data, padded to 8 bytes. Every record of the events ring is one ``struct event_t`` (96 bytes), so
the committed records up to the first busy one are copied out as one bytes object and decoded with
one ``struct.iter_unpack`` (bpf.py); the consumer position is then moved past them.

Only on x86-64, whose stores and loads are ordered as the kernel's release/acquire pairs need
(elsewhere, or if the map cannot be mapped, bcc's callback reads it as before).

The two positions are read and written whole, as one aligned 8-byte load or store (a native
``memoryview`` cast: CPython copies a native item with one ``memcpy`` of its size). A ``struct``
format with a byte order (``"<Q"``) packs and unpacks byte by byte: a producer reserving while the
consumer position was half written saw a position ahead of its own and took the ring for full —
16 of 600,000 reservations failed that way on the CPU machine with the ring never a quarter full
(tests/test_trace_ringread.py), where libbpf's reader lost none.
"""

from __future__ import annotations

import mmap
import platform
import struct

BUSY, DISCARD = 1 << 31, 1 << 30
HDR = 8


class Unavailable(OSError):
    """This ring cannot be read here from its mapping: use bcc's callback."""


class RingReader:
    def __init__(self, map_fd: int, data_size: int, record_size: int):
        if platform.machine() != "x86_64":
            raise Unavailable(f"no direct ring reads on {platform.machine()} (memory ordering)")
        if data_size & (data_size - 1):
            raise Unavailable(f"ring size {data_size} is not a power of two")
        page = mmap.PAGESIZE
        try:
            self._cons = mmap.mmap(map_fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
            self._prod = mmap.mmap(map_fd, page + 2 * data_size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        except (OSError, ValueError) as e:
            raise Unavailable(f"cannot map the ring: {e}") from None
        # each position as one native unsigned 64-bit item: loaded and stored whole (see above)
        self._cons_pos = memoryview(self._cons)[:8].cast("Q")
        self._prod_pos = memoryview(self._prod)[:8].cast("Q")
        self._page, self._mask = page, data_size - 1
        self.stride = (HDR + record_size + 7) & ~7
        self._want = record_size
        self._hdrs = struct.Struct(f"<I{self.stride - 4}x")  # each record's length word, one pass

    def pending(self) -> bool:
        return self._prod_pos[0] != self._cons_pos[0]

    def pending_records(self) -> int:
        """Records (committed or being written) in the ring now."""
        return (self._prod_pos[0] - self._cons_pos[0]) // self.stride

    def read(self) -> tuple[bytes, int]:
        """The committed records now in the ring, as one bytes object of n records of ``stride``
        bytes each (header included), and n; the ring's space is given back."""
        cons = self._cons_pos[0]
        prod = self._prod_pos[0]
        if prod == cons:
            return b"", 0
        avail = prod - cons
        off = self._page + (cons & self._mask)
        region = self._prod[off : off + avail]
        # every record of this ring has the one size: their length words are read in one pass
        n, odd = 0, False
        whole = avail - avail % self.stride
        for (h,) in self._hdrs.iter_unpack(memoryview(region)[:whole]):
            if h != self._want:
                odd = not h & BUSY  # (busy: being written; it and all after it wait for the next read)
                break
            n += 1
        pos = n * self.stride
        out = region if pos == avail else region[:pos]
        if odd or (n * self.stride == whole and whole < avail):
            rest, k, pos = self._read_odd(region, pos, avail)  # never expected: kept correct anyway
            out, n = out + rest, n + k
        if pos:
            self._cons_pos[0] = cons + pos
        return out, n

    def _read_odd(self, region: bytes, pos: int, avail: int) -> tuple[bytes, int, int]:
        """Records from POS one by one, whatever their size (a discarded one skipped, each cut or
        padded to the ring's record size): (them, how many, where reading stopped)."""
        out = []
        while pos + HDR <= avail:
            (h,) = struct.unpack_from("<I", region, pos)
            if h & BUSY:
                break
            size = h & ~(BUSY | DISCARD)
            if not h & DISCARD:
                rec = bytes(region[pos + HDR : pos + HDR + min(size, self._want)])
                out.append(bytes(HDR) + rec.ljust(self.stride - HDR, b"\0"))
            pos += (HDR + size + 7) & ~7
        return b"".join(out), len(out), pos

    def close(self) -> None:
        for v in (self._cons_pos, self._prod_pos):
            v.release()  # (an mmap with a view exported cannot be closed)
        for m in (self._cons, self._prod):
            try:
                m.close()
            except (BufferError, ValueError):
                pass
