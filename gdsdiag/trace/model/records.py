"""The classifier's ground: the records and limits its collaborators share (classify.py is the
dispatcher; procstate.py the processes and descriptors; calls.py the cuFile-call matching; hostio.py
the host-I/O verdicts; accounts.py the per-file and per-tree books). Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...routes import Confidence, Route
from .events import Event

if TYPE_CHECKING:
    from ...schema import trace as schema

READ_SYS = {"pread64", "preadv", "preadv2", "read", "readv"}
WRITE_SYS = {"pwrite64", "pwritev", "pwritev2", "write", "writev"}
VFORMS = {"readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2"}
POSITIONED = {"pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2"}
HOLD_NS = 100_000_000  # wait this long (event time) before taking a syscall as not libcufile's
COPY_WINDOW_NS = 3_000_000_000  # a CUDA copy this close to a host I/O, of its buffer, makes it DRAM_BOUNCE
FINALIZE_NS = 50_000_000  # evidence from other CPUs can arrive after the API exit
ASYNC_TIMEOUT_NS = 5_000_000_000
ADVANCE_NS = 20_000_000  # finalise at least this often in event time (the live loop polls every 0.1 s)
PAGE_RUN_GAP_NS = 100_000_000  # page-cache fills of one file closer than this are one mmap read
MIN_APP_IO = 4096
MAX_FILE_TIDS = 1024  # threads counted per file (mechanism.describe: "16 threads")
MAX_FILES = 20_000  # files accounted one by one in the summary; the rest together
MAX_FILE_PIDS = 256  # processes named per file (the "(other files)" account of a crafted recording had millions)
IN_KERNEL = {"copy_file_range", "sendfile", "splice"}  # both sides in the kernel: never a GPU


@dataclass(slots=True)
class Desc:
    """An open file description (shared by dup'd and inherited descriptors, as in the kernel)."""

    path: str
    pos: int = 0
    append: bool = False


@dataclass(slots=True)
class HostIo:
    """A file I/O outside cuFile, waiting for a CUDA copy of its buffer (or for its window to pass)."""

    e: Event
    api: str
    op: str
    path: str
    offset: int
    size: int
    ret: int | None
    buf: int | None  # host address of the data (None: not traced for this call)
    latency: int | None
    note: str


class Batched(dict):
    """A batch's verdicts per file-account key, put in the account once per key (accounts.Accounts.account
    after feed_whole and _on_bounces): key -> [verdicts, bytes, the furthest offset reached, the first
    start, the last end, the threads] (what _emit adds one verdict at a time)."""

    __slots__ = ()

    def add(self, key: tuple, nbytes: int, end: int, t0: int, t1: int, tid: int) -> None:
        acc = self.get(key)
        if acc is None:
            self[key] = [1, nbytes, end, t0, t1, {tid}]
        else:
            acc[0] += 1
            acc[1] += nbytes
            if end > acc[2]:
                acc[2] = end
            if t0 < acc[3]:
                acc[3] = t0
            if t1 > acc[4]:
                acc[4] = t1
            acc[5].add(tid)


def io_line(
    ts: int,
    pid: int,
    tid: int,
    comm: str,
    api: str,
    op: str,
    path: str | None,
    offset: int,
    size: int,
    ret: int | None,
    latency_ns: int | None,
    route: Route,
    subtype: str | None,
    confidence: Confidence,
    evidence: list[str],
) -> schema.IoLine:
    """A verdict: the ``trace --json`` io line itself (``schema.trace.IoLine``, where its fields are
    described), built here only, its keys in the order --json writes them."""
    return {
        "type": "io",
        "ts": ts,
        "pid": pid,
        "tid": tid,
        "comm": comm,
        "api": api,
        "op": op,
        "path": path,
        "offset": offset,
        "size": size,
        "ret": ret,
        "latency_ns": latency_ns,
        "route": route,
        "subtype": subtype,
        "confidence": confidence,
        "evidence": evidence,
    }
