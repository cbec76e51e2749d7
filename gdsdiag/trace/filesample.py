"""The content check while tracing: a file's fingerprint (model/content.py) read from the file itself.

The tracer reads files as root: 64 bytes of a regular file a traced process read (or, for ``find``,
a window around where its read began), opened without following a link anywhere on the path and
without blocking, compared and never printed (docs/security.md). Every answer is kept in
``answers``: the live loop writes them into the recording, where a replay's ContentCheck reads them
back. The reading lives here, outside trace/model/, which does no I/O (tests/test_layers.py).
"""

from __future__ import annotations

import os
import stat
import time
from collections import OrderedDict

from ..platform.inroot import Unsupported, open_no_links
from .model.content import (
    FNV_BASIS,
    FNV_PRIME,
    HASH_MASK,
    MIN_DISTINCT,
    SAMPLE_AT,
    SAMPLE_BYTES,
    SEARCH_WINDOW,
    ContentCheck,
    CopySample,
    FileSample,
    find_key,
    sample_hash,
)

FILES_OPEN = 32  # descriptors kept open, least recently used closed first


class LiveContentCheck(ContentCheck):
    """The file's fingerprint at (path, offset), read from the file as it is now."""

    live = True

    def __init__(self) -> None:
        super().__init__()
        self._files: OrderedDict[str, int] = OrderedDict()  # path -> fd
        # CLOCK_MONOTONIC (the probes' bpf_ktime_get_ns) to the realtime a file's mtime is in
        self._wall = time.time_ns() - time.monotonic_ns()

    def file_sample(self, path: str, offset: int, read_ts: int) -> FileSample | None:
        # (no cache: the file may be written between two asks, as a KV-cache block file is)
        fs = self._read(path, offset, read_ts)
        self.answers.append((path, offset, fs))
        return fs

    def find(self, path: str, around: int, copy: CopySample, read_ts: int) -> int | None:
        at = self._search(path, around, copy, read_ts)
        self.answers.append((*find_key(path, around), FileSample(at if at is not None else 0, 0, at is not None)))
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
        h = np.full(n, FNV_BASIS, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for k in range(4):
                h = (h ^ w[k : k + n]) * np.uint64(FNV_PRIME)
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
