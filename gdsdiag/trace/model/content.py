"""Evidence about the bytes: whether a CUDA copy's host source holds a file's bytes.

A copy from the read's own buffer is tied to the file by address. A copy from another buffer (a
pinned staging buffer, a tensor built from mapped bytes, a worker's shared memory) was tied to the
file only by order, and order cannot tell a loader that stages a file from a program that reads a
file only to checksum it while it copies other data of the same size and rhythm (issue 43). So the
probes read a fingerprint of every copy's source (probes/cufile_trace.c, ``copy_content``): a 30-bit
hash of the 32 bytes at its start and of the 32 at ``SAMPLE_AT``. Here the same fingerprint is made
of the file's own bytes at the offset the data-flow model proposes, and the two compared.

The comparison is made while tracing, on the file as it is then (trace/filesample.py reads it). A
replay cannot read the traced node's files: every answer is written into the recording (``Event``
kind ``content``) and read from there (ContentCheck here). A recording made before this existed has
none: its staged copies stay inferred from order. This module reads nothing: the hash, the
comparison and the recorded answers.
"""

from __future__ import annotations

from dataclasses import dataclass

SAMPLE_AT = 4064  # the second sample's offset in the copy (probes/cufile_trace.c: SAMPLE_AT)
SAMPLE_BYTES = 32
HASH_MASK = (1 << 30) - 1
# FNV-1a's 64-bit offset basis and prime (probes/cufile_trace.c: sample_hash)
FNV_BASIS, FNV_PRIME, _M64 = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1
FLAG_SAME, FLAG_CHANGED = 1, 2  # a copy of a read's buffer: still the read's bytes, or not
# a sample of fewer distinct byte values says nothing: zeros match zeros whatever their file
MIN_DISTINCT = 6
SEARCH_WINDOW = 64 << 10  # a copy's start is looked for this far around where a read began


def sample_hash(b: bytes) -> int:
    """probes/cufile_trace.c's sample_hash of 32 bytes (0: fewer, as the probe gives for a page it
    could not read)."""
    if len(b) < SAMPLE_BYTES:
        return 0
    h = FNV_BASIS
    for k in range(0, SAMPLE_BYTES, 8):
        h = ((h ^ int.from_bytes(b[k : k + 8], "little")) * FNV_PRIME) & _M64
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
    """The file's fingerprint at (path, offset), as a recording answered it (a replay cannot read the
    traced node's files). The live trace uses filesample.LiveContentCheck, which reads the file and
    keeps every answer it gave in ``answers`` for the recording."""

    live = False

    def __init__(self, recorded: dict | None = None) -> None:
        # a replay's answers, per (path, offset) in the order they were given (a file rewritten
        # between two asks answered twice)
        self.recorded: dict[tuple[str, int], list[FileSample]] = recorded or {}
        self.answers: list[tuple[str, int, FileSample]] = []

    def _replayed(self, key: tuple[str, int]) -> FileSample | None:
        """The recording's next answer to KEY (its last one stays for later asks)."""
        got = self.recorded.get(key)
        if not got:
            return None
        return got.pop(0) if len(got) > 1 else got[0]

    def file_sample(self, path: str, offset: int, read_ts: int) -> FileSample | None:
        return self._replayed((path, offset))

    def find(self, path: str, around: int, copy: CopySample, read_ts: int) -> int | None:
        """The file offset near AROUND (within SEARCH_WINDOW, 8-byte aligned) whose bytes the copy's
        source starts with, or None: a copy need not start where a read did (np.load's array starts
        128 bytes into the file, inside Python's first buffered 4 KiB read; the big read that follows
        starts at 4096). A replay reads the live trace's answer back, key (PATH, -1 - AROUND)."""
        fs = self._replayed(find_key(path, around))
        return fs.h0 if fs is not None and fs.informative else None  # (a find's answer: the offset in h0)

    def take_answers(self) -> list[tuple[str, int, FileSample]]:
        out, self.answers = self.answers, []
        return out

    def close(self) -> None:
        """Nothing held (the live check holds the files it read open)."""


def find_key(path: str, around: int) -> tuple[str, int]:
    """A find's answer's key, in its own key space beside file_sample's offsets."""
    return (path, -1 - around)


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
