"""Evidence about the bytes: whether a CUDA copy's host source holds a file's bytes.

A copy from the read's own buffer is tied to the file by address. A copy from another buffer (a
pinned staging buffer, a tensor built from mapped bytes, a worker's shared memory) was tied to the
file only by order, and order cannot tell a loader that stages a file from a program that reads a
file only to checksum it while it copies other data of the same size and rhythm (issue 43). So the
probes read a fingerprint of every copy's source (probes/cufile_trace.c, ``copy_content``): a 30-bit
hash of the 32 bytes at its start and of the 32 at ``SAMPLE_AT``. Here the same fingerprint is made
of the file's own bytes at the offset the data-flow model proposes, and the two compared.

The comparison is made while tracing, on the file as it is then. A replay cannot read the traced
node's files: every answer is written into the recording (``Event`` kind ``content``) and read from
there. A recording made before this existed has none: its staged copies stay inferred from order.

The tracer reads files as root: 64 bytes of a regular file a traced process read, opened without
following a final link and without blocking, compared and never printed (docs/security.md).
"""

from __future__ import annotations

import os
import stat
import time
from collections import OrderedDict
from dataclasses import dataclass

from ...platform.inroot import Unsupported, open_no_links

SAMPLE_AT = 4064  # the second sample's offset in the copy (probes/cufile_trace.c: SAMPLE_AT)
SAMPLE_BYTES = 32
HASH_MASK = (1 << 30) - 1
_BASIS, _PRIME, _M64 = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1
FLAG_SAME, FLAG_CHANGED = 1, 2  # a copy of a read's buffer: still the read's bytes, or not
# a sample of fewer distinct byte values says nothing: zeros match zeros whatever their file
MIN_DISTINCT = 6
FILES_OPEN = 32
SEARCH_WINDOW = 64 << 10  # a copy's start is looked for this far around where a read began


def sample_hash(b: bytes) -> int:
    """probes/cufile_trace.c's sample_hash of 32 bytes (0: fewer, as the probe gives for a page it
    could not read)."""
    if len(b) < SAMPLE_BYTES:
        return 0
    h = _BASIS
    for k in range(0, SAMPLE_BYTES, 8):
        h = ((h ^ int.from_bytes(b[k : k + 8], "little")) * _PRIME) & _M64
    return (((h >> 32) ^ h) & HASH_MASK) | 1


@dataclass(frozen=True, slots=True)
class CopySample:
    """What the probe read of a copy's host source (a6 of its record)."""

    flag: int  # FLAG_SAME / FLAG_CHANGED of a copy of a read's own buffer, else 0
    h0: int  # hash of its first 32 bytes, 0: not read
    h1: int  # hash of the 32 at SAMPLE_AT, 0: not read (or a copy under SAMPLE_AT + 32 bytes)

    @classmethod
    def of(cls, a6: int) -> CopySample | None:
        if a6 <= 0:
            return None
        return cls((a6 >> 60) & 3, (a6 >> 30) & HASH_MASK, a6 & HASH_MASK)


@dataclass(frozen=True, slots=True)
class FileSample:
    """The same fingerprint of a file's bytes at an offset, or why there is none."""

    h0: int
    h1: int  # 0: the file ends before SAMPLE_AT + 32 bytes from the offset
    informative: bool  # enough distinct bytes that a match means the same bytes


class Verdict:
    MATCH, DIFFERS, UNKNOWN = "match", "differs", "unknown"


def compare(copy: CopySample, fs: FileSample | None, rest: int) -> str:
    """Whether the copy's source starts with the file's bytes (REST: how many bytes of the file the
    model proposes from that offset on: the second sample is compared only where they reach it)."""
    if fs is None or not fs.h0 or not copy.h0:
        return Verdict.UNKNOWN
    second = rest >= SAMPLE_AT + SAMPLE_BYTES and fs.h1 and copy.h1
    same = copy.h0 == fs.h0 and (not second or copy.h1 == fs.h1)
    if not same:
        return Verdict.DIFFERS
    return Verdict.MATCH if fs.informative else Verdict.UNKNOWN


class ContentCheck:
    """The file's fingerprint at (path, offset): read from the file while tracing (``live``), from
    the recording's answers in a replay. Every answer given is kept in ``answers`` in the order given
    (the live loop writes them into the recording)."""

    def __init__(self, live: bool = False, recorded: dict | None = None) -> None:
        self.live = live
        # a replay's answers, per (path, offset) in the order they were given (a file rewritten
        # between two asks answered twice)
        self.recorded: dict[tuple[str, int], list[FileSample]] = recorded or {}
        self.answers: list[tuple[str, int, FileSample]] = []
        self._files: OrderedDict[str, int] = OrderedDict()  # path -> fd
        # CLOCK_MONOTONIC (the probes' bpf_ktime_get_ns) to the realtime a file's mtime is in
        self._wall = time.time_ns() - time.monotonic_ns()

    def _replayed(self, key: tuple[str, int]) -> FileSample | None:
        """The recording's next answer to KEY (its last one stays for later asks)."""
        got = self.recorded.get(key)
        if not got:
            return None
        return got.pop(0) if len(got) > 1 else got[0]

    def file_sample(self, path: str, offset: int, read_ts: int) -> FileSample | None:
        if not self.live:
            return self._replayed((path, offset))
        # (no cache: the file may be written between two asks, as a KV-cache block file is)
        fs = self._read(path, offset, read_ts)
        self.answers.append((path, offset, fs))
        return fs

    def find(self, path: str, around: int, copy: CopySample, read_ts: int) -> int | None:
        """The file offset near AROUND (within SEARCH_WINDOW, 8-byte aligned) whose bytes the copy's
        source starts with, or None: a copy need not start where a read did (np.load's array starts
        128 bytes into the file, inside Python's first buffered 4 KiB read; the big read that follows
        starts at 4096). Answers are kept like file_sample's (a replay reads them back, key AROUND)."""
        key = (path, -1 - around)  # (its own key space beside file_sample's offsets)
        if not self.live:
            fs = self._replayed(key)
            return fs.h0 if fs is not None and fs.informative else None  # (a find's answer: the offset in h0)
        at = self._search(path, around, copy, read_ts)
        self.answers.append((path, -1 - around, FileSample(at if at is not None else 0, 0, at is not None)))
        return at

    def _search(self, path: str, around: int, copy: CopySample, read_ts: int) -> int | None:
        import numpy as np

        lo = max(0, around - SEARCH_WINDOW) & ~7
        try:
            fd = self._unchanged_since(path, read_ts)
            if fd is None:
                return None
            region = os.pread(fd, 2 * SEARCH_WINDOW + SAMPLE_AT + SAMPLE_BYTES, lo)
        except OSError:
            return None
        n = (len(region) - SAMPLE_BYTES) // 8 + 1  # (aligned offsets with 32 bytes after them)
        if n <= 0:
            return None
        w = np.frombuffer(region[: (len(region) // 8) * 8], dtype="<u8")
        h = np.full(n, _BASIS, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for k in range(4):
                h = (h ^ w[k : k + n]) * np.uint64(_PRIME)
        h30 = (((h >> np.uint64(32)) ^ h) & np.uint64(HASH_MASK)) | np.uint64(1)
        for i in np.flatnonzero(h30 == copy.h0).tolist():
            off = 8 * i
            b0 = region[off : off + SAMPLE_BYTES]
            b1 = region[off + SAMPLE_AT : off + SAMPLE_AT + SAMPLE_BYTES]
            if copy.h1 and len(b1) == SAMPLE_BYTES and sample_hash(b1) != copy.h1:
                continue
            if len(set(b0 + b1)) < MIN_DISTINCT:
                continue  # (uniform bytes match anywhere)
            return lo + off
        return None

    def take_answers(self) -> list[tuple[str, int, FileSample]]:
        out, self.answers = self.answers, []
        return out

    def _open(self, path: str) -> int:
        fd = self._files.get(path)
        if fd is not None:
            now, held = os.stat(path, follow_symlinks=False), os.fstat(fd)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                self._files.move_to_end(path)
                return fd
            os.close(self._files.pop(path))  # (another file under the name now: removed, made again)
        try:  # (no link anywhere on the path: a traced user cannot point root at another file)
            fd = open_no_links(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
        except Unsupported:
            raise OSError(0, "openat2 is not available: the file is not read") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(0, "not a regular file")
        except OSError:
            os.close(fd)
            raise
        self._files[path] = fd
        if len(self._files) > FILES_OPEN:
            os.close(self._files.popitem(last=False)[1])
        return fd

    def _unchanged_since(self, path: str, read_ts: int) -> int | None:
        """PATH's descriptor, or None where the file was written after its read at READ_TS (its
        bytes now are not the ones the read put in memory); OSError where it cannot be opened."""
        fd = self._open(path)
        if read_ts and os.fstat(fd).st_mtime_ns > read_ts + self._wall:
            return None
        return fd

    def _read(self, path: str, offset: int, read_ts: int) -> FileSample:
        """The fingerprint of PATH's bytes at OFFSET (h0 0: unreadable, written since, or past its end)."""
        try:
            fd = self._unchanged_since(path, read_ts)
            if fd is None:
                return FileSample(0, 0, False)
            b0 = os.pread(fd, SAMPLE_BYTES, offset)
            b1 = os.pread(fd, SAMPLE_BYTES, offset + SAMPLE_AT)
        except OSError:
            return FileSample(0, 0, False)
        h0 = sample_hash(b0)
        if not h0:
            return FileSample(0, 0, False)
        return FileSample(h0, sample_hash(b1), len(set(b0 + b1)) >= MIN_DISTINCT)

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


def answer_args(offset: int, fs: FileSample) -> list[int]:
    """A content answer as a recording's event arguments: offset, h0, h1, informative."""
    return [offset, fs.h0, fs.h1, int(fs.informative)]


def answer_of(args: list) -> tuple[int, FileSample] | None:
    if len(args) < 4:
        return None
    # (a find's answer keeps a file offset in h0: not masked)
    return args[0], FileSample(args[1], args[2], bool(args[3]))


def answer_event(ts: int, path: str, offset: int, fs: FileSample):
    """A content answer as a recording's line (an Event of kind ``content``)."""
    from .events import Event

    return Event(ts, 0, 0, "content", "file", answer_args(offset, fs), "", path)


def recorded_answers(events) -> dict[tuple[str, int], list[FileSample]]:
    """A replay's answers from a recording's ``content`` events, per (path, offset) in file order."""
    out: dict[tuple[str, int], list[FileSample]] = {}
    for e in events:
        got = answer_of(e.args)
        if got is not None and e.path:
            out.setdefault((e.path, got[0]), []).append(got[1])
    return out
