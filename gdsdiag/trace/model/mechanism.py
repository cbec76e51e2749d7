"""What the program did to a file, in the words an engineer uses for a loader's engine: "io_uring
(registered files), O_DIRECT, 16 threads", "pread64 from 4 threads", "mmap page faults", "cuFile".
Pure: built from what the trace accounted per file (Classifier.file_summary: the calls that moved its
bytes, whether it was opened with O_DIRECT, the threads and the time its I/O spanned).

The rate is the file's bytes over the time from its first I/O's start to its last one's end: what the
program achieved on that file, not a ceiling (the disk's, the link's or a pinned copy's is not known
from the trace; `gdsdiag sweep` measures them on the node)."""

from __future__ import annotations

# the call names the trace gives host I/O, grouped by the engine they belong to
_ENGINES = (
    ("io_uring", ("io_uring",)),
    ("libaio", ("aio",)),
    ("pread", ("pread64", "preadv", "preadv2")),
    ("pwrite", ("pwrite64", "pwritev", "pwritev2")),
    ("read", ("read", "readv")),
    ("write", ("write", "writev")),
    ("mmap page faults", ("mmap",)),
    ("file-to-file copy", ("copy_file_range", "sendfile", "splice")),
)


def _engine(api: str) -> str:
    base = api.split(" (", 1)[0]  # ("read (counted in the kernel)")
    if base.startswith("cuFile"):
        return "cuFile"
    for name, apis in _ENGINES:
        if base in apis or base.startswith(apis):
            return name
    return base


def describe(via: list[str], opens: tuple[int, int], threads: int, cufile_unused: bool) -> str:
    """One line: the engines that moved the file's bytes, O_DIRECT (OPENS: the file's opens with
    it, and all of them), the threads doing it, and a libcufile the program loaded and did not use."""
    engines: list[str] = []
    for api in via:
        e = _engine(api)
        if e not in engines:
            engines.append(e)
    parts = [" + ".join(engines) or "no I/O seen"]
    direct, n = opens
    if direct and direct == n:
        parts.append("O_DIRECT")
    elif direct:
        parts.append(f"O_DIRECT on {direct} of its {n} opens")
    if threads > 1:
        parts.append(f"{threads} threads")
    if cufile_unused:
        parts.append("libcufile loaded, not used for it")
    return ", ".join(parts)


def rate(nbytes: int, first_ns: int, last_ns: int) -> float | None:
    """GB/s over the span of the file's I/O; None where the span is not known or too short to say."""
    span = last_ns - first_ns
    if nbytes <= 0 or first_ns <= 0 or span < 1_000_000:  # (under 1 ms: one I/O's latency, not a rate)
        return None
    return round(nbytes / span, 3)  # (bytes per ns = GB/s)
