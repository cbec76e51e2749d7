"""The per-I/O route classifier: a pure function of the event stream (live or replayed).

For every cuFile I/O (cuFileRead/Write, the async and batch forms) it collects the evidence that
fired for that I/O — on the calling thread or on libcufile's worker threads, matched by process,
time window, direction and file offset — and decides the route (``gdsdiag.routes.Route``):

  NVFS / P2PDMA / RDMA  P2P DMA: nvidia-fs (USDT cufio_gds_*, NVFS read/write ioctls, nvidia-fs
             kernel returns), PCI P2PDMA (mapping returns) or userspace RDMA (cufio_rdma_*)
  PEER_GPU   dynamic routing through a GPU nearer the storage (cufio-dr probes)
  COMPAT     libcufile's POSIX path: USDT cufio_px_* and/or pread/pwrite on the file
  UNKNOWN    nothing conclusive fired

Every other file I/O of a traced process (read/write/pread/…/io_uring/aio/copy_file_range, page-cache
fills of mmap'd files) is one of:

  DRAM_BOUNCE  host-memory I/O whose bytes a CUDA copy then moved to the GPU (read: a host-to-device
             copy from the I/O's buffer after it) or from it (write: a device-to-host copy into its
             buffer before it) — the copy is the evidence: direction, size and host address
  HOST       host I/O that no CUDA copy touched: not on the GPU data path (counted, not alarming)

Paths come from the stream itself: opens, closes, dups and execs are traced, so a reused descriptor
number is never reported under its old file; read/write offsets are the file position, kept from
open, lseek and the byte counts.

Argument meanings used (worked out on the GPU machine, captures in ../shared/research/captures/
and tests/fixtures/trace/): USDT cufio_core:cufio_px_read/write (6 args): arg1 = 0, arg2 = file
offset, arg3 = size, arg4 = GPU buffer offset, arg5 = bytes done, arg6 = 0; it fires on the thread
that issued the pread64/pwrite64, after the syscall returns. Requests >= 8 MiB are split into 8 MiB
chunks on worker threads: chunks are folded back into their API call by offset range.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING

from ...routes import Route
from ...units import size_text
from . import eventdefs
from .content import HASH_MASK, ContentCheck, recorded_answers
from .dataflow import RETAIN_NS, DataFlow, MappedFile, Source, Taken, TakenRead, staged_ok
from .events import API_NAMES, NVFS_IOCTLS, SYS_NAMES, Event, not_data
from .evidence import KPROBE_EVIDENCE, ROUTE_USDT, SYSCALL_EVIDENCE, decide_once, usdt_kind
from .mechanism import describe, rate
from .said import LINE_MAX, LINES_PER_PROCESS
from .tally import Unclassified, count_unclassified
from .why import FALLBACK_WORDS, REPLAY, file_why

if TYPE_CHECKING:
    from ...check.facts import NodeFacts
    from ...schema import trace as schema

READ_SYS = {"pread64", "preadv", "preadv2", "read", "readv"}
WRITE_SYS = {"pwrite64", "pwritev", "pwritev2", "write", "writev"}
VFORMS = {"readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2"}
POSITIONED = {"pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2"}
_RW_OP = {**dict.fromkeys(READ_SYS, "read"), **dict.fromkeys(WRITE_SYS, "write")}
HOLD_NS = 100_000_000  # wait this long (event time) before taking a syscall as not libcufile's
COPY_WINDOW_NS = 3_000_000_000  # a CUDA copy this close to a host I/O, of its buffer, makes it DRAM_BOUNCE
FINALIZE_NS = 50_000_000  # evidence from other CPUs can arrive after the API exit
ASYNC_TIMEOUT_NS = 5_000_000_000
ADVANCE_NS = 20_000_000  # finalise at least this often in event time (the live loop polls every 0.1 s)
PAGE_RUN_GAP_NS = 100_000_000  # page-cache fills of one file closer than this are one mmap read
_PROC_FD_RE = __import__("re").compile(r"^/proc/(self|thread-self|\d+)/fd/(\d+)$")
MIN_APP_IO = 4096
CUDA_LIBS = ("libcuda.so", "libcudart.so", "libcufile.so")
MAX_FILE_TIDS = 1024  # threads counted per file (mechanism.describe: "16 threads")
MAX_FILES = 20_000  # files accounted one by one in the summary; the rest together
MAX_FILE_PIDS = 256  # processes named per file (the "(other files)" account of a crafted recording had millions)
IN_KERNEL = {"copy_file_range", "sendfile", "splice"}  # both sides in the kernel: never a GPU
O_APPEND, O_CLOEXEC, O_TMPFILE, O_DIRECT = (
    0o2000,
    0o2000000,
    0o20000000,
    0o40000,
)  # (O_TMPFILE: __O_TMPFILE, without O_DIRECTORY)
AT_SYMLINK_FOLLOW, AT_EMPTY_PATH, RENAME_EXCHANGE = 0x400, 0x1000, 2
RENAME_KEEP_NS = 120_000_000_000  # renames kept for the names of verdicts still to come (held 35 s at most)
RENAMES_KEPT = 512  # at most (each verdict of an I/O before the last rename walks them)
# descriptors, handles, inodes and accounts a trace's renames may walk in all (a recording is a
# stranger's: a million renames over a million descriptors must not take hours); beyond it a rename
# moves the per-file account of that exact path only
RENAME_WORK_MAX = 5_000_000
TMPFILE_NAME = "(unnamed O_TMPFILE"  # an O_TMPFILE's name until a linkat names it: "DIR/(unnamed O_TMPFILE, fd N)"
RENAMED_FROM_MAX = 8  # earlier names kept per file (renamed_from); a file saved a thousand times names the first
URING_READ_OPS, URING_WRITE_OPS = (
    {1, 4, 22},
    {2, 5, 23},
)  # IORING_OP_READV, READ_FIXED, READ / WRITEV, WRITE_FIXED, WRITE
AIO_READ_OPS, AIO_WRITE_OPS = {0, 7}, {1, 8}  # IOCB_CMD_PREAD, PREADV / PWRITE, PWRITEV
# io_uring_register opcodes (uapi io_uring.h): the registrations that start a table (FILES, FILES2,
# BUFFERS, BUFFERS2), that change entries of one (FILES_UPDATE(2), BUFFERS_UPDATE), of files
URING_REG_NEW, URING_REG_UPDATE, URING_REG_FILES = {0, 2, 13, 15}, {6, 14, 16}, {2, 3, 6, 13, 14}
URING_FILE_SKIP = -2  # IORING_REGISTER_FILES_SKIP: an update leaves that entry as it is
URING_REG_MAX_BUFS = dict(eventdefs.CONSTANTS)["URING_REG_RECORDS"]  # the probe sends these many
URING_REG_MAX_FILES = 6 * URING_REG_MAX_BUFS


@dataclass(slots=True)
class _Desc:
    """An open file description (shared by dup'd and inherited descriptors, as in the kernel)."""

    path: str
    pos: int = 0
    append: bool = False


@dataclass(slots=True)
class _HostIo:
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


_BY_TS = itemgetter("ts")  # (a verdict line's time: the order verdicts come out in)


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
    confidence: str,
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


def _rivals_text(rivals: tuple[str, ...]) -> str:
    """The evidence note of bytes a staged copy took while bytes of other files waited too."""
    names = ", ".join(r.rsplit("/", 1)[-1] for r in rivals)
    return (
        f"inferred from order: bytes of other files were waiting for this copy too ({names}); which file's "
        "bytes it took is not known"
    )


def _cufile_error(rc: int) -> str:
    """A cuFile status code's name (cufile.h, CU_FILE_*), or its number."""
    from ...cufile.errors import OP_ERRORS

    name = OP_ERRORS.get(rc)
    return f"{rc} {name[0]}" if name else str(rc)


def _checked_text(offset: int) -> str:
    """The evidence note of a staged copy whose source was seen to hold the file's bytes."""
    return (
        f"checked by content: the copy's source holds this file's bytes at offset {offset} (fingerprints of "
        "its first bytes and of the file's, compared)"
    )


_BY_ORDER = "inferred from order, the oldest file bytes not yet copied: not checked by content ({})"
_BY_ORDER_TEXTS = (
    _BY_ORDER.format("this recording has no content checks (made before gdsdiag compared them)"),
    _BY_ORDER.format("the probe could not read the copy's source"),
    _BY_ORDER.format("the file's bytes could not be compared (unreadable, changed since, or too uniform to tell)"),
)


def _by_order_text(c: Sequence[int], checking: bool) -> str:
    """Why a staged copy's bytes are tied to the file by order only (low confidence)."""
    if not checking:
        return _BY_ORDER_TEXTS[0]
    sampled = len(c) > 6 and (c[6] >> 30) & HASH_MASK  # (the probe's hash of the source's first bytes)
    return _BY_ORDER_TEXTS[2 if sampled else 1]


def _copy_brief(c: Sequence[int], t: int) -> str:
    return f"CUDA copy host {c[3]:#x} -> GPU {c[2]:#x}, {c[4]} bytes, {(c[0] - t) / 1e6:+.3f} ms after it"


def _differs_text(src: Source, t: int) -> str:
    """Why a read no copy took is UNKNOWN although copies followed it: they did not carry its bytes."""
    if src.changed is not None:
        return (
            f"its buffer was copied to the GPU ({_copy_brief(src.changed, t)}) after other bytes were written into "
            "it (the probe saw the buffer differ from what this read put there): these bytes may have been "
            "transformed in place, or replaced; the trace cannot tell which"
        )
    c = src.differs
    assert c is not None
    return (
        f"a CUDA copy from another buffer followed ({_copy_brief(c, t)}), but not of these bytes (checked by "
        "content: its source's fingerprint differs from this file's bytes): the program decoded or converted "
        "them, or copied other data; the trace cannot tell which"
    )


@dataclass(slots=True, eq=False)  # (eq=False: a call is itself, found by identity in the lists it is in)
class _Pending:
    pid: int
    tid: int
    comm: str
    api: str
    op: str | None  # None: a call that moves no file data
    handle: int
    offset: int
    size: int
    t_start: int
    t_end: int | None = None
    ret: int | None = None
    evidence: dict = field(default_factory=dict)  # evidence label -> count
    bytes_seen: int = 0
    last_ts: int = 0
    kinds: set = field(default_factory=set)
    is_async: bool = False
    path: str | None = None  # resolved when the call starts (the handle may be gone later)

    def add(self, label: str, kind: str, ts: int, nbytes: int = 0, times: int = 1) -> None:
        ev = self.evidence
        ev[label] = ev.get(label, 0) + times
        self.kinds.add(kind)
        self.bytes_seen += nbytes
        if ts > self.last_ts:
            self.last_ts = ts

    def covers(self, off: int) -> bool:
        size = self.size
        return self.offset <= off < self.offset + (size if size > 1 else 1)


class _Calls:
    """cuFile calls not yet decided, per process: in flight (a sync call until its exit, an async or
    batch request until its bytes are in) and ended (sync calls in exit order, kept FINALIZE_NS for
    evidence from other CPUs). Evidence is matched against the few calls that can still take it, not
    every call held: at 25k calls/s the old single list made each match O(held) (66 verdicts/s)."""

    def __init__(self) -> None:
        self.inflight: dict[int, list[_Pending]] = {}
        self.ended: dict[int, deque[_Pending]] = {}
        # calls whose exit was lost (Classifier._retire_stale), oldest first: no evidence is matched
        # to them; decided or retired only at the end
        self.orphans: dict[int, list[_Pending]] = {}
        self.n = 0

    def __bool__(self) -> bool:
        return self.n > 0

    def add(self, p: _Pending) -> None:
        lst = self.inflight.get(p.pid)
        if lst is None:
            self.inflight[p.pid] = [p]
        else:
            lst.append(p)
        self.n += 1

    def _leave_flight(self, p: _Pending) -> bool:
        """P out of the calls in flight (and its process's list with it, when that empties): whether
        it was there."""
        lst = self.inflight.get(p.pid)
        if lst is None or p not in lst:
            return False
        lst.remove(p)
        if not lst:
            del self.inflight[p.pid]
        return True

    def forget(self, p: _Pending) -> None:
        """P leaves in flight undecided (Classifier.exits_counted: another count has it)."""
        if self._leave_flight(p):
            self.n -= 1

    def orphan(self, p: _Pending) -> None:
        """P, still in flight, lost its exit: out of the calls evidence is matched to."""
        if self._leave_flight(p):
            self.orphans.setdefault(p.pid, []).append(p)

    def forget_orphans(self, key: tuple[int, int], n: int) -> int:
        """The N oldest orphans of thread KEY leave undecided (exits_counted); how many of N are left."""
        lst = self.orphans.get(key[0])
        if not lst or n <= 0:
            return n
        keep = []
        for p in lst:
            if n and p.tid == key[1]:
                n -= 1
                self.n -= 1
            else:
                keep.append(p)
        if keep:
            self.orphans[key[0]] = keep
        else:
            del self.orphans[key[0]]
        return n

    def end(self, p: _Pending) -> None:
        # (an emptied list stays until finish drops it: the process's next call usually comes first)
        lst = self.inflight.get(p.pid)
        if lst is not None and p in lst:
            lst.remove(p)
            q = self.ended.get(p.pid)
            if q is None:
                q = self.ended[p.pid] = deque()
            q.append(p)

    def near(self, pid: int, ts: int, slack: int):
        for p in self.inflight.get(pid, ()):
            if ts >= p.t_start - slack:
                yield p
        for p in reversed(self.ended.get(pid, ())):
            if p.t_end is not None and p.t_end + slack < ts:
                break  # (in exit order: every older one ended earlier still)
            if ts >= p.t_start - slack:
                yield p

    def finish(self, now: int, final: bool) -> list[_Pending]:
        out = []
        for pid, q in list(self.ended.items()):
            while q and (final or now > q[0].t_end + FINALIZE_NS):  # type: ignore[operator]
                out.append(q.popleft())
            if not q:
                del self.ended[pid]
        for pid, lst in list(self.inflight.items()):
            keep: list[_Pending] = []
            for p in lst:
                done = final
                if p.is_async:
                    done = done or (p.bytes_seen >= p.size > 0) or now > p.t_start + ASYNC_TIMEOUT_NS
                    if done and p.t_end is None:
                        p.t_end = p.last_ts or now
                if final and p.t_end is None:
                    p.t_end = p.last_ts or p.t_start
                (out if done else keep).append(p)
            if keep:
                self.inflight[pid] = keep
            else:
                del self.inflight[pid]
        if final:
            for lst in self.orphans.values():
                for p in lst:
                    p.t_end = p.last_ts or p.t_start
                    out.append(p)
            self.orphans.clear()
        self.n -= len(out)
        out.sort(key=lambda p: p.t_start)
        return out


def _op_of(name: str) -> str | None:
    op = _OPS.get(name, "")
    if op == "":
        n = name.lower()
        op = "read" if "read" in n else "write" if "write" in n else None
        if len(_OPS) < 4096:  # (probe and API names: a few dozen)
            _OPS[name] = op
    return op


def _usdt_hit(name: str) -> tuple[str, bool, str | None, str]:
    """(evidence kind, matched by offset, direction, evidence label) of a USDT probe, cached."""
    hit = _USDT.get(name)
    if hit is None:
        kind, matched = usdt_kind(name)
        hit = (kind, matched, _op_of(name.split(":", 1)[-1]), f"usdt {name}")
        if len(_USDT) < 4096:  # (the probes' names: a few dozen)
            _USDT[name] = hit
    return hit


def _syscall_hit(api: str, fd: int) -> tuple[str, str]:
    """(evidence label, kind) of libcufile's own syscall API on descriptor FD inside a cuFile call,
    sent as its own record (_match_call) or folded into the call's exit (_folded): one label for both."""
    hit = _SYSCALL_HIT.get((api, fd))
    if hit is None:
        hit = (f"{api} fd {fd}", SYSCALL_EVIDENCE[api])
        if len(_SYSCALL_HIT) < 4096:  # (a few descriptors of a few processes)
            _SYSCALL_HIT[(api, fd)] = hit
    return hit


_OPS: dict[str, str | None] = {}  # name -> _op_of(name)
_SYSCALL_HIT: dict[tuple[str, int], tuple[str, str]] = {}  # (syscall, fd) -> _syscall_hit
_USDT: dict[str, tuple[str, bool, str | None, str]] = {}  # probe -> kind, matched, op, evidence label
_CUFILE_IO = frozenset(("cuFileRead", "cuFileWrite", "cuFileReadAsync", "cuFileWriteAsync"))
_CUFILE_SYNC_IO = frozenset(("cuFileRead", "cuFileWrite"))
_CUFILE_ASYNC = frozenset(("cuFileReadAsync", "cuFileWriteAsync"))
_API_OF = {n: name for n, name in API_NAMES.items() if name in _CUFILE_SYNC_IO}  # feed_whole's api ids
_OP_OF = {"cuFileRead": "read", "cuFileWrite": "write"}


def exit_is_io(name: str, args) -> bool:
    """The api_exit record of NAME with ARGS is itself a cuFileRead/Write call's I/O, for what counts
    I/Os without classifying them: its own thread's pread64/pwrite64 ride in it (record version 4, a1
    the syscalls folded). An exit with none folded is only an event: the syscalls that moved its bytes
    (libcufile's worker threads) went out as their own records and count as themselves."""
    return name in _CUFILE_SYNC_IO and len(args) > 6 and args[1] > 0


class _Batched(dict):
    """A batch's verdicts per file-account key, put in the account once per key (Classifier._account
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


def _add_pid_bytes(f: dict, pid: int, route: str, nbytes: int) -> None:
    """NBYTES of PID on ROUTE into file account F's by_pid (tree_summary's source); a process past
    MAX_FILE_PIDS of the file goes under its lowest one (a file read by thousands of processes:
    the account stays bounded)."""
    by_pid = f["by_pid"]
    mine = by_pid.get(pid)
    if mine is None:
        if len(by_pid) >= MAX_FILE_PIDS:
            pid = min(by_pid)
        mine = by_pid.setdefault(pid, {})
    mine[route] = mine.get(route, 0) + nbytes


class Classifier:
    """Feed events in (roughly) time order with ``feed``; collect the verdicts from ``drain`` and at
    the end from ``flush``: each the ``trace --json`` io line itself (``schema.trace.IoLine``), so the
    field list is written once and the JSON output is the verdict as it is. Keeps per-process state only for I/O still open."""

    def __init__(self, path_filter: str | None = None, record_version: int = 2):
        self.path_filter = path_filter.rstrip("/") + "/" if path_filter else None
        self.v1 = record_version < 2  # v-form syscalls carry the iovec array, not the buffer
        self.handles: dict[tuple[int, int], tuple[int, str | None]] = {}  # (pid, handle) -> (fd, path)
        self.fds: dict[tuple[int, int], _Desc] = {}  # (pid, fd) -> open file description
        self.cloexec: set[tuple[int, int]] = set()
        self.inodes: dict[tuple[int, int], str] = {}  # (kernel dev, ino) -> path
        self.procs: dict[int, dict] = {}  # pid -> ppid, comm, exe, ios
        self._data_paths: dict[str, bool] = {}  # path -> _is_data_path(path)
        self._jobs: dict[int, int] = {}  # pid -> job_of(pid), while procs and their parents stay as they are
        self.pending = _Calls()
        self.held: deque = deque()  # host I/O waiting for libcufile's call or a CUDA copy (time order)
        self.memcpy: dict[int, deque] = {}  # pid -> recent cuMemcpy events
        # (pid, tid, ts) of the device-to-host copies whose bytes a write was inferred to carry
        # (_copy_of: one copy's bytes go to the file once, as a read's bytes are taken once)
        self._copy_taken: set[tuple[int, int, int]] = set()
        # processes that made a CUDA copy other than host to device: a later write may be matched to
        # it (_copy_of), so their copies are never taken in bulk (bounce_ok)
        self._copied_back: set[int] = set()
        self.page_runs: dict[
            tuple[int, int, int], list
        ] = {}  # (pid, dev, ino) -> [first ts, last ts, first index, next index, event]
        self.api_stack: dict[tuple[int, int], list[_Pending]] = {}
        self.out: list[schema.IoLine] = []
        self.now = 0
        self.notes: list[str] = []
        self.counts = {"events": 0, "api_calls": 0, "unmatched_exits": 0, "small_io": 0}
        self.flow = DataFlow(self.job_of)  # file bytes in host memory and the copies that take them
        self.use_content(ContentCheck())  # (a replay without recorded answers: nothing is checked)
        self.files: dict[str, dict] = {}  # path -> what its bytes did (file_summary)
        # (time, old path, new path) of the renames of the last RENAME_KEEP_NS: a verdict decided after
        # a rename, of an I/O before it, takes the file's new name (_final_name)
        self._renames: deque[tuple[int, str, str]] = deque(maxlen=RENAMES_KEPT)
        self._rename_work = 0  # (RENAME_WORK_MAX)
        # (pid, ring fd) -> io_uring registered tables: "files" {index: _Desc | None}, "bufs" {index:
        # (base, length)}, and the tables' sizes when larger than the probe sends (_on_uring_register)
        self.uring: dict[tuple[int, int], dict] = {}
        self.cgroup_job = False  # --cgroup: the whole cgroup is one job
        # processes that opened a CUDA library (or were forked from one, or adopted with --pid): only
        # their file bytes can be another process's staged copy (a cp or tar in the same tree cannot)
        self.cuda_procs: set[int] = set()
        self.wrote_data: set[int] = set()  # processes that wrote data files (copy and archive tools)
        # libcufile in use, per process: the cuFile calls other than I/O it made (cuFileDriverOpen's
        # return code, or None until it returned), the processes that made cuFile I/O calls, and those
        # the live trace saw map libcufile (set at the end, from the probes' libraries): a loader that
        # loads libcufile and then moves its bytes another way (its own non-GDS fallback) is named so
        self.cufile_calls: dict[int, dict[str, int | None]] = {}
        self.cufile_io_pids: set[int] = set()
        self.libcufile_pids: set[int] = set()
        # what each process said on stderr about its data path (trace/said.py: the lines the probes
        # sent that name it), for the why of its files: a loader's own "falling back to …"
        self.said: dict[int, list[str]] = {}
        # opens of each path (data files only are looked up): [with O_DIRECT, all] (mechanism.describe)
        self.opens_of: dict[str, list[int]] = {}
        self.node: NodeFacts | None = None  # the node's GDS facts (check/facts.py), for each file's why
        self.node_missing = REPLAY  # why self.node is None (a live trace sets its own reason)
        # major page faults per mapped data file (the perf event page-faults-major, put in the file by
        # its address); None where that event was not attached: not counted, rather than none
        self.major_faults: dict[str, int] | None = None
        # --block: requests the traced processes issued per (device, R|W|…): [requests, bytes]
        # (block_summary; the device that served the bytes, e.g. the virtio disk under every read)
        self.block: dict[tuple[int, str], list[int]] = {}
        self.flow.can_feed = self.cuda_procs.__contains__
        self.flow.cuda_jobs = lambda: {self.job_of(p) for p in self.cuda_procs}
        self._advanced = 0  # event time of the last _advance (replay finalises as the live loop does)
        # flush(deadline): a stop's budget, and the I/Os it left undecided per process
        self._deadline: float | None = None
        self._late = False
        self._since_clock = 0
        self.unclassified: Unclassified = {}
        # cuFileRead/Write exits that are I/Os (exit_is_io) of calls whose start was not seen: counted,
        # no route (the summary's unclassified_by_process)
        self.unmatched: Unclassified = {}
        self._fold_shapes: dict[tuple, tuple] = {}  # _whole_verdict's labels and decision per fold shape
        self._comms: dict[bytes, str] = {}  # feed_whole: a record's comm bytes -> its text
        self._handlers = {
            "sys_exit": self._on_syscall,
            "open": self._on_open,
            "fd": self._on_fd,
            "proc": self._on_proc,
            "pages": self._on_pages,
            "majflt": self._on_major_fault,
            "handle": self._on_handle,
            "api_enter": self._on_api_enter,
            "api_exit": self._on_api_exit,
            "bounces": self._on_bounces,
            "batch_req": self._on_batch_req,
            "rename": self._on_rename,
            "said": self._on_said,
            "blk_issue": self._on_block,
            "usdt": self._on_evidence,
            "kprobe": self._on_evidence,
        }

    def _on_said(self, e: Event) -> None:
        lines = self.said.setdefault(e.pid, [])
        if e.path and len(lines) < LINES_PER_PROCESS:
            lines.append(e.path[:LINE_MAX])

    def program_said(self, pids) -> list[tuple[str, str]]:
        """(who, line) of what the processes PIDS said about their data path, the lines that say they
        fell back first (a loader's own reason), then in the order said."""
        out = [
            (f"{self._proc(pid)['comm'] or '?'}/{pid}", line) for pid in sorted(pids) for line in self.said.get(pid, ())
        ]
        return sorted(out, key=lambda x: not FALLBACK_WORDS.search(x[1]))

    def _on_block(self, e: Event) -> None:
        a = e.args
        if len(a) < 4:
            return
        op = chr(a[3]) if 32 < a[3] < 127 else "?"  # (rwbs' first letter: R, W, D discard, F flush)
        row = self.block.get((a[0], op))
        if row is None:
            row = self.block[(a[0], op)] = [0, 0]
        row[0] += 1
        row[1] += max(a[2], 0)

    def block_summary(self, name_of=None) -> list[dict]:
        """Per block device and direction: requests and bytes the traced processes issued (--block).
        NAME_OF(major, minor) -> its name (the live node's /sys/dev/block), else none."""
        out = []
        for (dev, op), (n, nbytes) in sorted(self.block.items(), key=lambda x: -x[1][1]):
            major, minor = dev >> 20, dev & 0xFFFFF  # (the kernel's dev_t in block tracepoints)
            out.append(
                {
                    "device": f"{major}:{minor}",
                    "name": name_of(major, minor) if name_of else None,
                    "op": op,
                    "requests": n,
                    "bytes": nbytes,
                }
            )
        return out

    def use_content(self, check: ContentCheck) -> None:
        """Where staged copies' fingerprints are checked against the files' bytes (content.py):
        the files themselves while tracing, a recording's answers in a replay."""
        self.content = check
        self.flow.check = check

    # -- input ---------------------------------------------------------------------------------
    def feed(self, e: Event) -> None:
        counts = self.counts
        n = counts["events"] = counts["events"] + 1
        ts = e.ts
        if ts > self.now:
            self.now = ts
        handler = self._handlers.get(e.kind)
        if handler is not None:
            handler(e)
        if n % 512 == 0 or ts - self._advanced > ADVANCE_NS:
            self._advance()

    def advance(self, complete_ns: int = 0) -> None:
        """Finalise what is old enough; the live loop calls it after each batch of events, with the
        time up to which it has fed every event (COMPLETE_NS, the probes' clock): a quiet program's
        held I/O and calls are decided when their wait ends, not at its next event or its exit."""
        if complete_ns > self.now:
            self.now = complete_ns
        self._advance()

    # -- processes and descriptors -----------------------------------------------------------------
    def _proc(self, pid: int, comm: str = "") -> dict:
        p = self.procs.get(pid)
        if p is None:
            p = self.procs[pid] = {"pid": pid, "ppid": None, "comm": comm, "exe": None, "ios": 0}
            self._jobs.clear()  # (a new process can be the traced parent another one's job walks to)
        elif comm and not p["comm"]:
            p["comm"] = comm
        return p

    def _on_proc(self, e: Event) -> None:
        a = e.args
        if e.name == "fork" and len(a) > 2 and a[2] == 1:
            # a thread (bpf._is_thread): one task more of its process, not a process (its events come
            # with the process's pid); counted under it (the summary's processes say "threads")
            p = self._proc(a[0])
            p["threads"] = p.get("threads", 0) + 1
        elif e.name == "fork" and len(a) > 1:
            parent, child = a[0], a[1]
            # the child starts with the parent's descriptors, sharing their file descriptions
            for (pid, fd), d in list(self.fds.items()):
                if pid == parent:
                    self.fds[(child, fd)] = d
                    if (pid, fd) in self.cloexec:
                        self.cloexec.add((child, fd))
            p = self._proc(child, e.comm)
            p["ppid"] = parent
            self._jobs.clear()
            if parent in self.cuda_procs:
                self.cuda_procs.add(child)
            self.flow.inherit(parent, child, e.ts)  # (after the parent link: the child is in its job)
            for (pid, ring), t in list(self.uring.items()):  # (its rings too, with their registrations)
                if pid == parent:
                    self.uring[(child, ring)] = {k: v.copy() if isinstance(v, dict) else v for k, v in t.items()}
        elif e.name == "exec":
            for key, run in [(k, r) for k, r in self.page_runs.items() if k[0] == e.pid]:
                self._close_page_run(key, run)  # while the old image's mappings are still known
            p = self._proc(e.pid)
            p["comm"], p["exe"] = e.comm or p["comm"], e.path
            for fdkey in [k for k in self.cloexec if k[0] == e.pid]:
                self.fds.pop(fdkey, None)
                self.cloexec.discard(fdkey)
            self.cuda_procs.discard(e.pid)  # a new program opens its libraries again
            self.flow.unmap_all(e.pid)  # a new program: the old image's mappings are gone
        elif e.name == "adopt":
            self.cuda_procs.add(e.pid)  # (its libraries were mapped before the trace: not known)
            p = self._proc(e.pid, e.comm)
            p["ppid"] = a[0] if a else None
            self._jobs.clear()
            p["exe"] = e.path
        elif e.name == "exit":
            self._proc(a[0] if a else e.pid)["exited"] = True
        elif e.name == "thread_exit" and len(a) > 1:
            self._thread_ended(a[0], a[1])

    def _thread_ended(self, pid: int, tid: int) -> None:
        """Thread TID of PID ended (the kernel says so: probes/cufile_trace.c sched_process_exit). If
        its fork was taken for a process's (it ended before the reader looked in /proc), it is one
        thread more of PID instead. Events never carry a thread's id as their pid: nothing else
        was counted under it."""
        p = self.procs.get(tid)
        if p is None or p.get("ppid") != pid or p.get("exe") or p["ios"]:
            return
        del self.procs[tid]
        self._jobs.clear()
        for key in [k for k in self.fds if k[0] == tid]:  # (the fork gave it its parent's descriptors)
            self.fds.pop(key, None)
            self.cloexec.discard(key)
        parent = self._proc(pid)
        parent["threads"] = parent.get("threads", 0) + 1

    def _on_open(self, e: Event) -> None:
        if not e.args:
            return
        fd = e.args[0]
        key = (e.pid, fd)
        self.cloexec.discard(key)
        if not e.path:
            self.fds.pop(key, None)
            return
        if e.path.rsplit("/", 1)[-1].startswith(CUDA_LIBS):
            self.cuda_procs.add(e.pid)
        flags = e.args[1] if len(e.args) > 1 else 0
        pos = e.args[2] if len(e.args) > 2 else 0
        if not e.path.startswith("/") and len(e.args) > 5 and e.args[5] >= 0:
            base = self.fds.get((e.pid, e.args[5]))  # openat relative to a directory fd
            e.path = (base.path.rstrip("/") + "/" + e.path) if base else e.path
        m = _PROC_FD_RE.match(e.path)
        if m:
            # /proc/self/fd/N (or /proc/PID/fd/N) opens the file fd N has open (the sweep re-opens its
            # data file this way to drop O_NOFOLLOW for libcufile; fio and kvikio are handed it so):
            # the new descriptor names that file, not /proc
            owner = e.pid if m.group(1) in ("self", "thread-self") else int(m.group(1))
            src = self.fds.get((owner, int(m.group(2))))
            if src is not None:
                e.path = src.path
        if flags & O_TMPFILE == O_TMPFILE:
            # an unnamed file in that directory, until a linkat names it (_on_rename): one name per open
            e.path = f"{e.path.rstrip('/')}/{TMPFILE_NAME}, fd {fd})"
        self.fds[key] = _Desc(e.path, pos, bool(flags & O_APPEND))
        n = self.opens_of.get(e.path)
        if n is None and len(self.opens_of) < MAX_FILES:
            n = self.opens_of[e.path] = [0, 0]
        if n is not None:
            n[0] += bool(flags & O_DIRECT)
            n[1] += 1
        if flags & O_CLOEXEC:
            self.cloexec.add(key)
        if len(e.args) > 4 and e.args[4]:
            self.inodes[(e.args[3], e.args[4])] = e.path

    def _on_fd(self, e: Event) -> None:
        a = e.args + [0] * 4
        key = (e.pid, a[0])
        if e.name in ("close", "unnamed_open"):
            self.fds.pop(key, None)
            self.cloexec.discard(key)
        elif e.name == "dup":
            new = (e.pid, a[1])
            d = self.fds.get(key)
            self.cloexec.discard(new)
            if d is None:
                self.fds.pop(new, None)
            else:
                self.fds[new] = d
                if a[2]:
                    self.cloexec.add(new)
        elif e.name == "lseek":
            d = self.fds.get(key)
            if d is not None:
                d.pos = a[1]
        elif e.name == "mmap":
            d = self.fds.get(key)
            if d is not None:
                if self._is_data(d.path):
                    self.flow.add_map(e.pid, d.path, e.ts, a[1], a[2], a[3])
            elif a[1] > 0 and a[2] > 0:
                self.flow.add_foreign_map(e.pid, e.ts, a[1], a[2])

    def _on_rename(self, e: Event) -> None:
        """rename/renameat/renameat2 (path "OLD\\0NEW", args [old dfd, new dfd, flags]), or linkat of a
        descriptor (AT_EMPTY_PATH, or /proc/self/fd/N with AT_SYMLINK_FOLLOW: an O_TMPFILE given its
        name). From now on the file is NEW: the descriptors open on it, its account (file_summary),
        the registered io_uring files, the counted I/O (counted.py reads the resolved event), and
        the verdicts still to come of its I/O before the rename (_final_name). A plain hard link
        leaves the old name in place: not a rename."""
        old, _, new = (e.path or "").partition("\0")
        e.path = None  # (what counted.CountedIo reads: set below to the rename as applied, if it is one)
        a = e.args + [-100, -100, 0]
        new = self._joined(e.pid, new, a[1])
        if e.name == "linkat":
            d = self._linked(e.pid, old, a[0], a[2])
            if d is None:
                return
            old = d.path
        else:
            old = self._joined(e.pid, old, a[0])
        if not old.startswith("/") or not new.startswith("/") or old == new:
            return
        e.path = old + "\0" + new
        if e.name == "renameat2" and a[2] & RENAME_EXCHANGE:
            # (the two names swap: through a name no path has, at the same time, in order)
            swap = old + "\0exchange"
            self._rename(old, swap, e.ts)
            self._rename(new, old, e.ts)
            self._rename(swap, new, e.ts)
        else:
            self._rename(old, new, e.ts)

    def _joined(self, pid: int, path: str, dfd: int) -> str:
        """PATH relative to directory fd DFD, where the reader left it relative (it could not read
        /proc/PID/fd/DFD) and the traced table names that directory."""
        if path.startswith("/") or dfd < 0:
            return path
        base = self.fds.get((pid, dfd))
        return base.path.rstrip("/") + "/" + path if base else path

    def _linked(self, pid: int, old: str, dfd: int, flags: int) -> _Desc | None:
        """The unnamed O_TMPFILE a linkat names (AT_EMPTY_PATH: descriptor DFD; /proc/self/fd/N
        followed), or None: a link of a path, or of a file that has a name, is a second name (a hard
        link), and the first stays."""
        d = None
        if not old and flags & AT_EMPTY_PATH:
            d = self.fds.get((pid, dfd))
        m = _PROC_FD_RE.match(old)
        if m and flags & AT_SYMLINK_FOLLOW:
            owner = pid if m.group(1) in ("self", "thread-self") else int(m.group(1))
            d = self.fds.get((owner, int(m.group(2))))
        return d if d is not None and TMPFILE_NAME in d.path else None

    def _rename(self, old: str, new: str, ts: int) -> None:
        """OLD (a file, or a directory: every path under it) is NEW from TS on."""
        q = self._renames
        q.append((ts, old, new))
        while q and q[0][0] < ts - RENAME_KEEP_NS:
            q.popleft()
        work = len(self.fds) + len(self.handles) + len(self.inodes) + len(self.files)
        if self._rename_work + work > RENAME_WORK_MAX:
            if old in self.files:
                self._move_account(old, new)
            return
        self._rename_work += work
        registered = [d for t in self.uring.values() for d, _ in t["files"].values()]
        for d in {id(d): d for d in (*self.fds.values(), *registered)}.values():
            moved = _moved(d.path, old, new)
            if moved is not None:
                d.path = moved
        for key, (fd, path) in list(self.handles.items()):
            moved = _moved(path, old, new) if path else None
            if moved is not None:
                self.handles[key] = (fd, moved)
        for key, path in list(self.inodes.items()):
            moved = _moved(path, old, new)
            if moved is not None:
                self.inodes[key] = moved
        for path in [p for p in self.files if _moved(p, old, new) is not None]:
            self._move_account(path, _moved(path, old, new) or new)

    def _move_account(self, path: str, new: str) -> None:
        """PATH's account under its new name (added to an account already there: the file it
        replaced had that name too, as a checkpoint saved again over its last copy), the old name in
        renamed_from."""
        f = self.files.pop(path)
        f["path"] = new
        names = f.setdefault("renamed_from", [])
        if path not in names and len(names) < RENAMED_FROM_MAX and "\0" not in path:  # (not an exchange's step)
            names.append(path)
        into = self.files.get(new)
        if into is None:
            self.files[new] = f
            return
        for k in ("ios", "bytes", "page_cache_bytes", "device_fill_bytes"):
            into[k] += f[k]
        for k, n in f["routes"].items():
            into["routes"][k] = into["routes"].get(k, 0) + n
        for k in ("via", "how", "via_to_gpu"):
            into[k] |= f[k]
        for k, cap in (("pids", MAX_FILE_PIDS), ("tids", MAX_FILE_TIDS)):
            into[k] |= set(sorted(f[k])[: max(0, cap - len(into[k]))])
        # (each process's bytes too: tree_summary reads them, and a merge that left them out lost
        # the renamed file's bytes from every tree)
        for pid, routes in f["by_pid"].items():
            for route, n in routes.items():
                _add_pid_bytes(into, pid, route, n)
        if f["first_ns"] and (not into["first_ns"] or f["first_ns"] < into["first_ns"]):
            into["first_ns"] = f["first_ns"]
        into["last_ns"] = max(into["last_ns"], f["last_ns"])
        if "lost_in_kernel" in f:
            lost = into.setdefault("lost_in_kernel", {"ios": 0, "bytes": 0})
            lost["ios"] += f["lost_in_kernel"]["ios"]
            lost["bytes"] += f["lost_in_kernel"]["bytes"]
        if "unknown_why" in f:
            into.setdefault("unknown_why", f["unknown_why"])
        into["max_offset"] = max(into["max_offset"], f["max_offset"])
        if f.get("inferred"):
            into["inferred"] = True
        kept = into.setdefault("renamed_from", [])
        kept += [n for n in names if n not in kept][: RENAMED_FROM_MAX - len(kept)]

    def _final_name(self, path: str, ts: int) -> str:
        """The name of the file PATH named at TS, after the renames since."""
        if self._renames[-1][0] <= ts:
            return path  # (most verdicts: of an I/O after the last rename, such as a start-up's .pyc writes)
        for t, old, new in self._renames:
            if t > ts:
                moved = _moved(path, old, new)
                if moved is not None:
                    path = moved
        return path

    def _on_pages(self, e: Event) -> None:
        """Page-cache fills outside read syscalls (mmap faults and their readahead): consecutive
        pages of one file become one read."""
        if e.comm.startswith(("iou-wrk", "iou-sqp")):
            return  # io_uring's workers filling pages for requests already reported as io_uring I/O
        dev, ino, index, n = (e.args + [0, 0, 0, 1])[:4]
        # (fills of a data file only: the probe also sends a library's pages faulting in within
        # 200 ms of a mapping (probes/cufile_trace.c), whose runs are dropped unnamed; with them
        # every read of a cold-started CUDA program kept a read cover and its taken reads were
        # modelled for its whole life, a fifth of each bounce verdict's CPU on the H100)
        path = self.inodes.get((dev, ino))
        if path is not None and self._is_data_path(path):
            self.flow.note_fills(e.pid)
        key = (e.pid, dev, ino)
        run = self.page_runs.get(key)
        if run is not None and index == run[3] and e.ts - run[1] <= PAGE_RUN_GAP_NS:
            run[1], run[3] = e.ts, index + n
            return
        if run is not None:
            self._close_page_run(key, run)
        self.page_runs[key] = [e.ts, e.ts, index, index + n, e]

    def _on_major_fault(self, e: Event) -> None:
        """A major fault of a process at an address: the mapped data file it falls in counts it (a
        library's or an anonymous mapping's are not the trace's to name)."""
        if self.major_faults is None:
            self.major_faults = {}  # (a recording that has them: its trace counted them)
        addr = e.args[0] if e.args else 0
        for mf in self.flow.maps_of.get(e.pid, ()):
            for start, length, _ in mf.maps:
                if start <= addr < start + length:
                    path = mf.path
                    self.major_faults[path] = self.major_faults.get(path, 0) + 1
                    return

    def _close_page_run(self, key, run) -> None:
        self.page_runs.pop(key, None)
        pid, dev, ino = key
        path = self.inodes.get((dev, ino))
        if path is None:
            return  # a library or a file opened before the trace: not named, not data
        e = run[4]
        off, size = run[2] * 4096, (run[3] - run[2]) * 4096
        if not self._is_data(path):
            return
        # a mapped file's pages faulting in, or readahead of a file read next (the data-flow model
        # tells the two apart by whether this process maps the file)
        self.flow.add_fill(pid, path, run[0], off, off + size, run[1] - run[0], e)

    def _is_data(self, path: str) -> bool:
        return not not_data(path) and self._path_ok(path)

    def job_of(self, pid: int) -> int:
        """The traced tree a process belongs to: its topmost traced ancestor (the cgroup, for --cgroup)."""
        if self.cgroup_job:
            return 0
        job = self._jobs.get(pid)
        if job is not None:
            return job
        first = pid
        seen = 0
        p = self.procs.get(pid)
        while p is not None and p.get("ppid") in self.procs and seen < 64:
            pid = p["ppid"]
            p = self.procs.get(pid)
            seen += 1
        self._jobs[first] = pid  # (cleared whenever a process or a parent link is added)
        return pid

    # -- host I/O: the syscalls ------------------------------------------------------------------------
    def _desc(self, e: Event, fd: int) -> _Desc | None:
        d = self.fds.get((e.pid, fd))
        if d is None and e.path and fd >= 0:  # a version-1 record: the path came with the event
            d = self.fds[(e.pid, fd)] = _Desc(e.path)
        return d

    def _on_syscall(self, e: Event) -> None:
        name = e.name
        a = e.args  # (read only: the event's own list, as the probes record its 7 arguments)
        if len(a) < 7:
            a = a + [0] * 7
        if name == "ioctl" or name in ("io_submit", "io_uring_enter"):
            self._on_evidence(e)
            return
        ret = a[5] if a[5] < 1 << 63 else a[5] - (1 << 64)
        op: str | None = _RW_OP.get(name)
        if op is not None:
            d = self.fds.get((e.pid, a[0]))
            if d is None:
                d = self._desc(e, a[0])
            if d is None:
                if name in POSITIONED and self.pending:
                    # libcufile's own descriptors may predate the trace: still evidence for its calls
                    self._host_io(e, name, op, None, a[3], ret, ret, a[1], a[6], "")
                return  # a pipe, socket, library or anything else not named as a data file
            if name in POSITIONED:
                off = a[3]
            else:
                d.pos += a[4]  # bytes moved at the position while the kernel counted them (record v3)
                off = -1 if (d.append and op == "write") else d.pos
                if ret > 0:
                    d.pos = (d.pos + ret) if off >= 0 else d.pos
            buf = None if (self.v1 and name.endswith(("v", "v2"))) else a[1]
            size = ret if ret >= 0 else (a[2] if name in ("pread64", "pwrite64", "read", "write") else 0)
            self._host_io(e, name, op, d.path, off, size, ret, buf, a[6], "")
        elif name == "aio":
            op = "read" if a[4] in AIO_READ_OPS else "write" if a[4] in AIO_WRITE_OPS else None
            d = self._desc(e, a[0])
            if op is None or d is None:
                return
            self._host_io(
                e,
                "aio",
                op,
                d.path,
                a[3],
                a[2],
                None,
                a[1] if a[4] in (0, 1) else None,
                None,
                "Linux AIO request (completion not traced: size is the request's)",
            )
        elif name in ("io_uring_rw", "io_uring"):
            self._on_uring_rw(e, a, ret)
        elif name == "io_uring_register":
            self._on_uring_register(e.pid, a)
        elif name in ("copy_file_range", "sendfile", "splice"):
            # both sides stay in the kernel: a file read and/or written, never a GPU
            for fd, offi, op in ((a[0], 3, "read"), (a[1], 4, "write")):
                d = self._desc(e, fd)
                if d is None:
                    continue
                off = a[offi]
                if off == -1 or (name == "sendfile" and op == "write"):
                    off = d.pos
                    if ret > 0:
                        d.pos += ret
                self._host_io(
                    e,
                    name,
                    op,
                    d.path,
                    off,
                    max(ret, 0),
                    ret,
                    None,
                    a[6],
                    f"{name} fd {a[0]} -> fd {a[1]}: an in-kernel copy, no user buffer",
                )

    def _on_uring_rw(self, e: Event, a: list, ret: int) -> None:
        """One io_uring read or write. io_uring_rw (probes/cufile_trace.c uring_t): a1 the buffer
        address (0: not known), a2 the opcode | (ring fd + 1) << 32; io_uring, the older record: a1
        user_data, a2 the opcode. A fixed-file request (IOSQE_FIXED_FILE) names an index into the
        ring's registered files (_on_uring_register), a READ_FIXED/WRITE_FIXED buffer lies in one of
        its registered buffers."""
        opcode = a[2] & 0xFF
        op = "read" if opcode in URING_READ_OPS else "write" if opcode in URING_WRITE_OPS else None
        if op is None:
            return
        rw = e.name == "io_uring_rw"
        ring = (a[2] >> 32) - 1 if rw else -1
        buf = (a[1] or None) if rw else None
        fixed_buf = opcode in (4, 5)  # READ_FIXED, WRITE_FIXED
        tables = self._uring_tables(e.pid, ring) if a[4] & 1 or fixed_buf else None
        if a[4] & 1:  # IOSQE_FIXED_FILE: a registered-file index, not an fd
            d, note = self._fixed_file(tables, a[0])
        else:
            d = self._desc(e, a[0])
            note = "" if buf else "io_uring request (buffer address not traced)"
        if fixed_buf:
            note = ", ".join(filter(None, (note, self._fixed_buffer(tables, buf))))
        off = a[3]
        if d is None:
            if not (a[4] & 1):
                return
            path = f"<io_uring fixed file {a[0]}>"
        else:
            path = d.path
            if off == -1:
                off = d.pos
                if ret > 0:
                    d.pos += ret
        self._host_io(e, "io_uring", op, path, off, max(ret, 0), ret, buf, a[6], note)

    def _uring_tables(self, pid: int, ring: int) -> dict | None:
        """The registered tables of PID's ring RING; with RING not known (-1: an SQPOLL thread
        submitted it) or registered under another number (a registered ring's index), the process's
        only ring with tables."""
        t = self.uring.get((pid, ring))
        if t is None:
            mine = [v for (p, _), v in self.uring.items() if p == pid]
            t = mine[0] if len(mine) == 1 else None
        return t

    @staticmethod
    def _fixed_file(tables: dict | None, index: int) -> tuple[_Desc | None, str]:
        """The open file at INDEX of a ring's registered files, and the evidence that says so."""
        files = tables["files"] if tables else {}
        hit = files.get(index)
        if hit is not None:
            return hit[0], f"io_uring request on registered file #{index} (fd {hit[1]} when registered)"
        size = tables.get("files_n", 0) if tables else 0
        if size > len(files) and index >= URING_REG_MAX_FILES:
            why = f"the ring registered {size} files, the first {URING_REG_MAX_FILES} are traced"
        elif tables is None:
            why = "no registration of the ring's files was traced"
        else:
            why = "not a data file the trace named when it was registered"
        return None, f"io_uring request on registered file #{index} (its path is not known: {why})"

    @staticmethod
    def _fixed_buffer(tables: dict | None, buf: int | None) -> str:
        """Evidence of a READ_FIXED/WRITE_FIXED address: which registered buffer holds it."""
        if not buf:
            return ""
        bufs = (tables or {}).get("bufs", {})
        for i, (base, n) in sorted(bufs.items()):
            if base <= buf < base + n:
                return f"in registered buffer #{i} ({base:#x}, {n} bytes)"
        size = (tables or {}).get("bufs_n", 0)
        more = (
            f" (the ring registered {size} buffers, the first {URING_REG_MAX_BUFS} are traced)"
            if size > len(bufs)
            else ""
        )
        return "in no registered buffer the trace saw" + more

    def _on_uring_register(self, pid: int, a: list) -> None:
        """One record of an io_uring_register (probes/cufile_trace.c uring_register_exit): a0 the
        ring's fd, a1 the opcode | entries here << 8, a2 the table index of the first, a3 the call's
        entries, a4..a6 six s32 descriptors or one buffer (base, length). A descriptor is resolved
        now: a ring keeps its file after the program closes the fd."""
        op, k, first, total = a[1] & 0xFF, (a[1] >> 8) & 0xFF, a[2], a[3]
        key = (pid, a[0])
        t = self.uring.get(key)
        if t is None:
            t = self.uring[key] = {"files": {}, "bufs": {}}
        files = op in URING_REG_FILES
        table = t["files"] if files else t["bufs"]
        if op in URING_REG_NEW and first == 0:  # (a register's first record: the table starts anew)
            table.clear()
            t["files_n" if files else "bufs_n"] = total
        if op not in URING_REG_NEW and op not in URING_REG_UPDATE:  # UNREGISTER_BUFFERS, UNREGISTER_FILES
            table.clear()
            return
        if files:
            words = [v & 0xFFFFFFFFFFFFFFFF for v in a[4:7]]
            fds = [x for w in words for x in (w & 0xFFFFFFFF, w >> 32)]
            for i in range(k):
                fd = fds[i] - (1 << 32) if fds[i] >= 1 << 31 else fds[i]
                if fd == URING_FILE_SKIP:
                    continue
                d = self.fds.get((pid, fd)) if fd >= 0 else None
                if d is None:
                    table.pop(first + i, None)
                else:
                    table[first + i] = (d, fd)  # (the open file itself: its position, its renames)
        elif k:
            base, n = a[4], a[5]
            if base and n > 0:
                table[first] = (base, n)
            else:
                table.pop(first, None)

    def _host_io(self, e, api, op, path, off, size, ret, buf, lat, note) -> None:
        if self.pending and self._match_call(e, api, op, off, path):
            return
        if path is not None and not self._data_paths.get(path, None) and not self._is_data_path(path):
            return
        if 0 <= size < MIN_APP_IO:  # small reads/writes (headers, configs) are not a data path
            self.counts["small_io"] += 1
            return
        io = _HostIo(e, api, op, path, off, size, ret, buf, lat, note)
        if op == "write":
            self.wrote_data.add(e.pid)  # (a process without CUDA that writes files: copied_elsewhere)
        if op == "read" and path is not None and api not in IN_KERNEL:
            # file bytes in host memory: the data-flow model's, until a copy takes them or the window passes
            pid = e.pid
            self.flow.add_read(Source(pid, self.job_of(pid), e.ts, path, off, size, buf, io))
        else:
            self.held.append(io)  # a write (its copy came before it) or an in-kernel copy

    def _is_data_path(self, path: str) -> bool:
        """Not a pseudo-file, library or source (events.not_data) and under --path:
        asked per I/O of a few files, so answered once per path (bounded, like dataflow.staged_ok)."""
        ok = self._data_paths.get(path)
        if ok is None:
            if len(self._data_paths) > 65536:
                self._data_paths.clear()
            ok = self._data_paths[path] = not not_data(path) and self._path_ok(path)
        return ok

    def _on_handle(self, e: Event) -> None:
        if e.name == "cuFileHandleRegister" and len(e.args) > 1:
            # the traced descriptor table first; else the path the reader looked up for this fd when
            # the event arrived (an fd opened before the trace, or whose open event was lost)
            d = self.fds.get((e.pid, e.args[1]))
            if d is not None:
                e.path = d.path
        if e.name == "cuFileHandleRegister" and len(e.args) >= 3 and e.args[2] == 0:
            self.handles[(e.pid, e.args[0])] = (e.args[1], e.path)
        elif e.name == "cuFileHandleDeregister":
            self.handles.pop((e.pid, e.args[0]), None)

    def _on_api_enter(self, e: Event) -> None:
        name = e.name
        if name == "cuMemcpy":
            q = self.memcpy.get(e.pid)
            if q is None:
                q = self.memcpy[e.pid] = deque(maxlen=4096)
            q.append(e)
            a = e.args
            if len(a) < 4:
                a = a + [0, 0, 0, 0]
            if a[3] != 1:
                self._copied_back.add(e.pid)
            flow = self.flow
            # dst, src, bytes, direction, what the probe read of the host source (recordings of
            # version 4 and before: nothing)
            flow.copy(e.ts, e.pid, a[0], a[1], a[2], a[3], a[6] if len(a) > 6 else 0)
            if flow.done or flow.chunks or flow.expired_fills:
                self._take_flow()
            return
        key = (e.pid, e.tid)
        stack = self.api_stack.get(key)
        if stack is None:
            stack = self.api_stack[key] = []
        if name not in _CUFILE_IO:
            calls = self.cufile_calls.get(e.pid)
            if calls is None:
                calls = self.cufile_calls[e.pid] = {}
            calls.setdefault(name, None)
            stack.append(_Pending(e.pid, e.tid, e.comm, name, "", 0, 0, 0, e.ts))
            return
        self.cufile_io_pids.add(e.pid)
        self.counts["api_calls"] += 1
        a = e.args
        if len(a) < 4:
            a = a + [0] * 6
        h = self.handles.get((e.pid, a[0]))
        # (positional: once per cuFile call, and keywords cost a dataclass __init__ more)
        p = _Pending(
            e.pid, e.tid, e.comm, name, _op_of(name), a[0], a[3], a[2], e.ts, None, None, {}, 0, 0, set(),
            name in _CUFILE_ASYNC, h[1] if h is not None else None,
        )  # fmt: skip
        self.pending.add(p)
        stack.append(p)

    def _on_api_exit(self, e: Event) -> None:
        stack = self.api_stack.get((e.pid, e.tid))
        if not stack:
            self.counts["unmatched_exits"] += 1
            if exit_is_io(e.name, e.args):
                # its start was not seen (the trace attached mid-call, or the ring was full): the
                # I/O it is still counts, with its bytes, but has no route
                count_unclassified(self.unmatched, e.pid, 1, 1, max(e.args[0], 0), read=e.name == "cuFileRead")
            return
        p = stack.pop()
        if p.api == "cuFileDriverOpen" and e.args:
            self.cufile_calls.setdefault(e.pid, {})["cuFileDriverOpen"] = e.args[0] & 0xFFFFFFFF
        if p.api in _CUFILE_SYNC_IO:
            a = e.args
            ret = a[0] if a else None
            if ret is not None and ret >= 1 << 63:
                ret -= 1 << 64
            p.ret, p.t_end = ret, e.ts
            folded = len(a) > 6 and (a[1] or a[4])
            if folded and not p.evidence and a[4] and ret is not None and ret > 0 and a[5] == ret:
                # its own thread's POSIX I/O moved every byte it returned (the px USDT hits' bytes
                # ride in the exit): nothing another thread does later is this call's, so it is
                # decided now, not held FINALIZE_NS among the ended calls (at 40k calls/s 2,000 of
                # them, searched by every later piece of evidence of the process, and each verdict
                # 50 ms late). The same evidence and rules as after the hold.
                self.pending.forget(p)
                self._emit(self._whole_verdict(p, e))
            else:
                if folded:
                    self._folded(p, e)
                self.pending.end(p)
            if stack:  # (a call under it: usually none)
                self._retire_stale(stack)
        elif p.is_async:
            p.ret = e.args[0] if e.args else None  # the enqueue status; I/O follows on the stream

    def _retire_stale(self, stack: list[_Pending]) -> None:
        """A thread's cuFileRead/Write calls come one after another (the probes keep one call a
        thread: cufile_trace.c in_api), so a call of it still open under the one that just ended
        lost its exit (the kernel's full ring or the reader's backlog dropped it). It is set aside
        now (_Calls.orphan), not left in flight until the trace's end: there it took later evidence
        of its thread as its own, and every call's end searched the list past it (20k dropped exits
        made each end 20k steps). At the end it is what it was: exits_counted retires it, or flush
        decides it, as before."""
        while stack and stack[-1].t_end is None and stack[-1].api in _CUFILE_SYNC_IO:
            self.pending.orphan(stack.pop())

    def _folded(self, p: _Pending, e: Event) -> None:
        """The evidence the call's own thread gave, sent with its exit (record version 4, probes/
        cufile_trace.c api_fold_t): args [ret, syscalls, their fd, their id, USDT hits, their bytes,
        the probe's ROUTE_USDT index]. Added as _match_call and _on_evidence add the same evidence
        sent one record each: the same labels, counts and kinds, so the verdict is the same."""
        _, n_sys, fd, sys_id, n_usdt, nbytes, rid = e.args[:7]
        api = SYS_NAMES.get(sys_id) if n_sys else None
        if api in SYSCALL_EVIDENCE:
            label, kind = _syscall_hit(api, fd)
            p.add(label, kind, e.ts, 0, n_sys)
            if p.path is None:
                d = self.fds.get((e.pid, fd))
                if d is not None:
                    p.path = d.path  # the handle's registration was not seen: the file it read names it
        if n_usdt:
            name = ROUTE_USDT[rid] if 0 <= rid < len(ROUTE_USDT) else f"usdt#{rid}"
            kind, _, _, label = _usdt_hit(name)
            p.add(label, kind, e.ts, nbytes, n_usdt)

    def _fold_shape(self, api: str, args) -> tuple:
        """(evidence labels, route, subtype, confidence, whether the fold names the file) of a call
        whose evidence is its exit's fold ARGS alone: _folded then _verdict's labels and decision,
        kept per fold shape (syscalls, fd, syscall, USDT hits, probe)."""
        q = _Pending(0, 0, "", api, _op_of(api), 0, 0, 0, 0)
        q.path = ""  # (the file is the call's own, looked up by the caller)
        self._folded(q, Event(0, 0, 0, "api_exit", api, list(args)))
        ev = [k if n == 1 else f"{k} ×{n}" for k, n in q.evidence.items()]
        route, sub, conf, notes = decide_once(q.kinds)
        names_file = args[1] > 0 and SYS_NAMES.get(args[3]) in SYSCALL_EVIDENCE
        shape = (ev + list(notes), route, sub, conf, names_file)
        if len(self._fold_shapes) < 4096:  # (a few descriptors of a few processes)
            self._fold_shapes[(api, args[1], args[2], args[3], args[4], args[6])] = shape
        return shape

    def _whole_verdict(self, p: _Pending, e: Event) -> schema.IoLine:
        """_folded then _verdict of a call whose evidence is its exit's fold alone, the fold's labels,
        kinds and decision worked out once per fold shape (syscalls, fd, syscall, USDT hits, probe):
        a COMPAT stream repeats one shape (tests/test_trace_fold.py holds it to the two steps)."""
        a = e.args
        shape = self._fold_shapes.get((p.api, a[1], a[2], a[3], a[4], a[6]))
        if shape is None:
            shape = self._fold_shape(p.api, a)
        ev, route, sub, conf, names_file = shape
        path = p.path
        if path is None and names_file:
            d = self.fds.get((e.pid, a[2]))
            if d is not None:
                path = d.path  # the handle's registration was not seen: the file it read names it
        if not path:
            path = self.handles.get((p.pid, p.handle), (None, None))[1]
        self._proc(p.pid, p.comm)["ios"] += 1
        # (e.ts: the exit's own time, the call's t_end)
        return io_line(
            p.t_start, p.pid, p.tid, p.comm, p.api, p.op or "?", path, p.offset, p.size, p.ret,
            e.ts - p.t_start, route, sub, conf, ev.copy(),
        )  # fmt: skip

    def whole_gate(self):
        """What wholecalls.py must leave to the event path: (processes with host I/O held here, which
        a call of theirs still in flight could claim at the hold's end; tid -> (pid, calls open on
        its stack) for the threads with one, whose next exit is the event path's; bounce_ok)."""
        held = {io.e.pid for io in self.held}
        return held, {tid: (pid, len(stack)) for (pid, tid), stack in self.api_stack.items() if stack}, self.bounce_ok

    def bounce_ok(self, pids: list[int], copiers: list[int], leads: list[tuple[int, int, int, bool]]) -> set[int]:
        """Which of PIDS may have bounce pairs (a read, then a copy of exactly its buffer) taken in
        bulk (wholecalls.WholeCalls._bounces): the processes this classifier holds nothing of that
        such a pair could meet — no cuFile call undecided (it could claim the read), no host I/O
        held, no run of page fills still open (its fill is absorbed by a read, or not, by time), no
        copy other than host to device seen (a later write may be matched to it) — whose job has no
        process among COPIERS, whose copies go the event path's way: a staged copy of another process
        of the job could take these reads' bytes there. A job's first copies may be pairs taken here
        (_on_bounces marks the job as copying, as DataFlow.copy does; the GPU machine's recorded 50k-pair
        stream went the event path for its first 16k records while this waited for a copy the event
        path had seen). A copier not known here (its fork not fed yet): none may. (File bytes
        waiting, mapped files: the copy finds its own read by address first; _feed_bounces puts the
        reads in the data-flow model where a later copy could still find them.)
        LEADS, (pid, host address, time, late) of the copies of PIDS before their thread's first read
        (the event path's, fed before the pairs): one that finds its read here by address, as
        DataFlow._direct would, takes nothing else; any other is a copier too, and one LATE (after a
        read of its own process's pairs) refuses its process."""
        procs, pending, by_page = self.procs, self.pending, self.flow.by_page
        jobs: dict[int, set[int]] = {}  # job -> its copiers
        refused: set[int] = set()
        for q, host, ts, late in leads:
            s = by_page.get((q, host >> 12))
            if s is not None and s.buf is not None and s.buf <= host < s.buf + max(s.size, 1) and s.ts <= ts + 1:
                continue
            copiers = [*copiers, q]
            if late:
                refused.add(q)
        for q in copiers:
            if q not in procs:
                return set()
            jobs.setdefault(self.job_of(q), set()).add(q)
        busy = {io.e.pid for io in self.held}
        busy.update(pid for (pid, _), stack in self.api_stack.items() if stack)
        busy.update(key[0] for key in self.page_runs)
        busy |= self._copied_back
        busy |= refused
        ok = set()
        for p in pids:
            if p not in procs or p in busy or pending.inflight.get(p) or pending.ended.get(p) or pending.orphans.get(p):
                continue
            job = self.job_of(p)
            if not (jobs.get(job, set()) - {p}):  # (its own earlier copies are fed first)
                ok.add(p)
        return ok

    def feed_whole(self, pairs, bounces=()) -> list[Event]:
        """Whole sync cuFile calls paired from the ring's records (wholecalls.WholeCalls.split):
        each decided as _on_api_enter, _on_api_exit and _whole_verdict decide it, through the same
        fold-shape table, and put in the file account once per file, route and process of the batch
        (what _emit adds one verdict at a time). A call whose handle's file is not known here comes
        back as its two events, for the caller to feed in time order with the rest (its thread may
        have an exit there still to come first)."""
        counts, handles, shapes, procs, comms = self.counts, self.handles, self._fold_shapes, self.procs, self._comms
        out = self.out
        left: list[Event] = []
        account = _Batched()  # (path, route, api, pid) -> [verdicts, bytes, end]
        now = self.now
        for t0, pid, tid, craw, api_id, handle, size, off, t1, ret, n_sys, fd, sys_id, n_usdt, nbytes, rid in pairs:
            comm = comms.get(craw)
            if comm is None:
                comm = comms[craw] = craw.split(b"\0", 1)[0].decode(errors="replace")
            api = _API_OF[api_id]  # (wholecalls.py pairs cuFileRead and cuFileWrite alone)
            h = handles.get((pid, handle))
            if h is None or not h[1]:
                left.append(Event(t0, pid, tid, "api_enter", api, [handle, 0, size, off, 0, 0, 0], comm))
                left.append(Event(t1, pid, tid, "api_exit", api, [ret, n_sys, fd, sys_id, n_usdt, nbytes, rid], comm))
                continue
            shape = shapes.get((api, n_sys, fd, sys_id, n_usdt, rid))
            if shape is None:
                shape = self._fold_shape(api, (ret, n_sys, fd, sys_id, n_usdt, nbytes, rid))
            if t1 > now:
                now = t1
            p = procs.get(pid)
            if p is None:
                p = self._proc(pid, comm)
            elif comm and not p["comm"]:
                p["comm"] = comm
            p["ios"] += 1
            ev, route, sub, conf, _ = shape
            path = h[1]
            out.append(
                io_line(
                    t0, pid, tid, comm, api, _OP_OF[api], path, off, size, ret, t1 - t0, route, sub, conf, ev.copy()
                )
            )
            n = size if size > 0 else 0
            account.add((path, route, api, pid), n, off + n if off >= 0 else 0, t0, t1, tid)
        taken = len(pairs) - len(left) // 2
        counts["events"] += 2 * taken
        counts["api_calls"] += taken
        self.now = now
        for (path, route, api, pid), (ios, nbytes, end, first, last, tids) in account.items():
            self._account(path, ios, nbytes, route, api, pid, end, first, last, tids)
        if bounces:
            left += self._feed_bounces(bounces)
        return left

    def _feed_bounces(self, pairs) -> list[Event]:
        """Bounce pairs (wholecalls.WholeCalls._bounces: a positioned read, then a host-to-device copy
        of exactly its buffer and bytes, of a process bounce_ok let through), as one "bounces" event
        per process, at its first read's time, for the caller to feed in time order with the rest:
        its copies the event path has, older, go first (_on_bounces decides the pairs). A process any
        of whose pairs the event path would not take as such (a descriptor not known or not a data
        file here, a read below MIN_APP_IO, a stop's deadline running) comes back as its events."""
        fds, data_paths, comms = self.fds, self._data_paths, self._comms
        back: set[int] = {pr[1] for pr in pairs} if self._deadline is not None else set()
        mine: dict[int, list] = {}
        for pr in pairs:
            pid = pr[1]
            d = fds.get((pid, pr[5]))
            path = d.path if d is not None else ""
            if not path or pr[10] < MIN_APP_IO or not (data_paths.get(path) or self._is_data_path(path)):
                back.add(pid)
            lst = mine.get(pid)
            if lst is None:
                mine[pid] = [(path, pr)]
            else:
                lst.append((path, pr))
        left = []
        for pid, lst in mine.items():
            craw = lst[0][1][3]
            comm = comms.get(craw)
            if comm is None:
                comm = comms[craw] = craw.split(b"\0", 1)[0].decode(errors="replace")
            if pid not in back:
                first = lst[0][1]  # (at the later of its first read and its last copy before it: pr[20])
                left.append(Event(first[20], pid, first[2], "bounces", "", lst, comm))
                continue
            for _, pr in lst:
                left.append(Event(pr[0], pid, pr[2], "sys_exit", SYS_NAMES[pr[4]], list(pr[5:12]), comm))
                left.append(Event(pr[12], pid, pr[2], "api_enter", "cuMemcpy", list(pr[13:20]), comm))
        return left

    def _on_bounces(self, e: Event) -> None:
        """One process's bounce pairs (_feed_bounces), each decided as _on_syscall, _host_io and
        DataFlow._direct decide it at the copy (DRAM_BOUNCE, direct, high), through the same evidence
        text and io line, and put in the file account once per file of the batch."""
        pairs = e.args
        pid, comm, procs, out, flow = e.pid, e.comm, self.procs, self.out, self.flow
        # with file bytes of the process waiting for a copy, a read taken stays in the data-flow model
        # behind them (a later copy of its buffer finds it there, taken, and adds nothing); a process
        # whose page fills come absorbs them into its reads (DataFlow.add_read)
        modelled = pid in flow.by_pid or pid in flow.fill_pids
        by_page = flow.by_page
        job = self.job_of(pid)
        account = _Batched()  # (path, api) -> [verdicts, bytes, end]
        taken: list[Source] = []  # (modelled: the reads, for DataFlow.add_taken)
        ok_path, ok = None, False  # (modelled: the last read's file, staged_ok of it)
        p = procs.get(pid)
        if p is None or (comm and not p["comm"]):
            p = self._proc(pid, comm)
        for path, pr in pairs:
            ts, _, tid, _, sys_id, fd, buf, _, off, _, ret, lat, t_copy, dst, src, n = pr[:16]
            api = SYS_NAMES[sys_id]
            head = f"{api} fd {fd} into host memory {buf:#x}" if buf else f"{api} fd {fd}"
            if t_copy > ts:  # (_copy_text's words for a copy after its read, without its list)
                # (%-formatting: the same text as the f-string of _copy_text, in two thirds of its time)
                ev = [
                    head,
                    "CUDA copy host %#x -> GPU %#x, %d bytes, %+.3f ms after it" % (src, dst, n, (t_copy - ts) / 1e6),
                ]
            else:
                ev = [head, self._copy_text([t_copy, pid, dst, src, n, 1], ts, "direct")]
            out.append(
                io_line(ts, pid, tid, comm, api, "read", path, off, ret, ret, lat, Route.DRAM_BOUNCE, None, "high", ev)
            )
            if modelled:  # (DataFlow.add_read, then _consume of all of it, its verdict made here)
                if path is not ok_path:  # (a batch's pairs read one file or a few: asked once a run)
                    ok_path, ok = path, staged_ok(path)
                taken.append(TakenRead(pid, job, ts, path, off, ret, buf, t_copy, dst, src, ok))
            else:
                flow.reads += 1  # (DataFlow.add_read numbers every read)
                if pr[21]:  # (the newest read into its buffer's page here: found by it, RETAIN_NS)
                    by_page[(pid, buf >> 12)] = Taken(pid, buf, ret, ts, t_copy + RETAIN_NS)
            account.add((path, api), ret, off + ret if off >= 0 else 0, ts, ts + (lat or 0), tid)
        if taken:
            flow.add_taken(taken)
        p["ios"] += len(pairs)
        last = pairs[-1][1]
        if last[12] > self.now:
            self.now = last[12]
        self.counts["events"] += 2 * len(pairs) - 1  # (feed counted this one)
        flow.by_job.setdefault(job, set()).add(pid)
        flow.copying_jobs.add(job)  # (as DataFlow.copy does at each pair's copy)
        q = self.memcpy.get(pid)
        if q is None:
            q = self.memcpy[pid] = deque(maxlen=4096)
        # (only copies other than host to device are ever matched from here, and this process made
        # none: its last copy stands for the ones taken, as "the process made a CUDA copy")
        q.append(Event(last[12], pid, last[2], "api_enter", "cuMemcpy", list(last[13:20]), comm))
        for (path, api), (ios, nbytes, end, first, t_end, tids) in account.items():
            f = self._account(path, ios, nbytes, Route.DRAM_BOUNCE, api, pid, end, first, t_end, tids)
            f["how"].add("direct")

    def _on_batch_req(self, e: Event) -> None:
        a = e.args + [0] * 7
        self.counts["api_calls"] += 1
        self.pending.add(
            _Pending(
                e.pid,
                e.tid,
                e.comm,
                "cuFileBatchIO",
                _op_of(e.name),
                a[0],
                a[3],
                a[2],
                e.ts,
                is_async=True,
                path=self.handles.get((e.pid, a[0]), (None, None))[1],
            )
        )

    def _ok(self, p: _Pending, e: Event, op: str | None, off: int | None, slack: int) -> bool:
        if p.t_end is not None and e.ts > p.t_end + slack:
            return False
        if op is not None and p.op and p.op != op:
            return False
        return off is None or p.covers(off)

    def _candidates(self, e: Event, op: str | None, off: int | None, every: bool = False) -> list[_Pending]:
        """The calls this evidence can belong to, best first (the same thread, then the latest
        started); every=True for evidence that belongs to all of them (one io_submit, many requests)."""
        slack = 2_000_000
        if not every:
            # the usual case first: evidence on the calling thread, inside its call (in flight); (_ok
            # written out: once per event of every cuFile call)
            ts, tid = e.ts, e.tid
            for p in reversed(self.pending.inflight.get(e.pid, ())):
                if (
                    p.tid == tid
                    and ts >= p.t_start - slack
                    and (p.t_end is None or ts <= p.t_end + slack)
                    and (op is None or not p.op or p.op == op)
                    and (off is None or p.offset <= off < p.offset + (p.size if p.size > 1 else 1))
                ):
                    return [p]
        out = []
        for p in self.pending.near(e.pid, e.ts, slack):
            if self._ok(p, e, op, off, slack):
                out.append(p)
        # prefer the same thread, then the latest started
        out.sort(key=lambda p: (p.tid != e.tid, -p.t_start))
        return out

    def _on_evidence(self, e: Event) -> None:
        name = e.name
        a = e.args
        if e.kind == "usdt":
            hit = _USDT.get(name)
            if hit is None:
                hit = _usdt_hit(name)
            kind, matched, op, label = hit
            if matched:
                # the probe fires per syscall of the call (libcufile splits large requests): matched to
                # the call covering its file offset; only the POSIX probes carry offset and size
                px = kind == "px"
                off = a[1] if px and len(a) > 1 else None
                nbytes = a[2] if px and len(a) > 2 else 0
                cands = self._candidates(e, op, off)
                if cands:
                    cands[0].add(label, kind, e.ts, nbytes)
                return
            for p in self._candidates(e, None, None)[:1]:
                p.add(label, kind, e.ts)
            return
        if e.kind == "kprobe":
            ret = a[0] if a else 0
            rule = KPROBE_EVIDENCE.get(name)
            kind = rule(ret) if rule is not None else ""
            if kind:
                for p in self._candidates(e, None, None)[:1]:
                    p.add(f"kprobe {name}={ret}", kind, e.ts)
            return
        # syscalls
        if name == "ioctl":
            cmd = a[4] if len(a) > 4 else 0
            label = NVFS_IOCTLS.get(cmd, hex(cmd))
            op = "read" if label == "NVFS_IOCTL_READ" else "write" if label == "NVFS_IOCTL_WRITE" else None
            if op:
                for p in self._candidates(e, op, None)[:1]:
                    p.add(f"ioctl {label}", SYSCALL_EVIDENCE["ioctl"], e.ts)
            return
        if name in ("io_submit", "io_uring_enter"):
            # one submission carries many requests (libcufile's compat batch path uses io_submit)
            for p in self._candidates(e, None, None, every=True):
                if p.api == "cuFileBatchIO" or p.is_async:
                    p.add(f"{name}", SYSCALL_EVIDENCE[name], e.ts)

    def _match_syscall(self, io: _HostIo) -> bool:
        """Is this pread/pwrite (or AIO request) libcufile's own, inside a cuFile call on its file?"""
        return self._match_call(io.e, io.api, io.op, io.offset, io.path)

    def _match_call(self, e: Event, api: str, op: str | None, off: int, path: str | None) -> bool:
        """_match_syscall of an I/O not held (yet): the usual case of libcufile's own pread, which
        then needs no _HostIo."""
        if not self.pending or (api not in POSITIONED and api != "aio"):
            return False
        cands = self._candidates(e, op, off)
        if not cands:
            return False
        p = cands[0]
        label, kind = _syscall_hit(api, e.args[0])
        p.add(label, kind, e.ts, 0)
        if p.path is None and path is not None:
            p.path = path  # the handle's registration was not seen: the file it read names it
        return True

    # -- finalisation ----------------------------------------------------------------------------
    def _advance(self, final: bool = False) -> None:
        now = self.now
        self._advanced = now
        for p in self.pending.finish(now, final):
            if self._deadline is not None and self._out_of_time():
                self._unclassified(p.pid, p.op, p.ret)
                continue
            self._emit(self._verdict(p))
        for key, run in list(self.page_runs.items()):
            if final or now - run[1] > PAGE_RUN_GAP_NS:
                self._close_page_run(key, run)
        held = self.held
        while held:
            io = held[0]
            # (what is held: writes, whose copy came before them, and in-kernel copies, which no copy
            # takes: only libcufile's call can still claim them)
            if not final and io.e.ts + HOLD_NS >= now:
                break
            held.popleft()
            if self._out_of_time():
                if io.path is not None:
                    self._unclassified(io.e.pid, io.op, io.ret)
                continue
            if not self._match_syscall(io) and io.path is not None:
                self._emit(self._host_verdict(io))
        self.flow.advance(now, final)
        self._take_flow()

    def exits_counted(self, threads: Mapping[tuple[int, int], int]) -> None:
        """THREADS: {(pid, tid): how many} of cuFileRead/Write exits counted as I/Os without being
        classified (exit_is_io): dropped by the kernel with the ring full (bpf lost_exits), by the
        reader's backlog, or left by a stop (live.py). The calls they end, where held here in flight
        for that thread, are those I/Os: they leave undecided, or flush would decide them as if they
        had ended without their exits and each I/O would count twice. A thread's calls are one after
        another, so its calls held in flight, oldest first, are the ones whose exits were not seen
        (at most the last one may still have none: the program ended mid-call). Given once every
        event that will be fed has been, before flush."""
        for key, n in threads.items():
            n = self.pending.forget_orphans(key, n)  # (the oldest: set aside when a later call ended)
            stack = self.api_stack.get(key)
            if not stack or n <= 0:
                continue
            keep = []
            for p in stack:
                if n and p.api in _CUFILE_SYNC_IO and p.t_end is None:
                    self.pending.forget(p)
                    n -= 1
                else:
                    keep.append(p)
            stack[:] = keep

    def flush(self, deadline: float | None = None) -> None:
        """Decide everything still held, as if its evidence were complete. DEADLINE (time.monotonic):
        a stop's budget. Past it, the file I/Os still held (for a CUDA copy of their bytes or for
        libcufile's call: up to 65,536 per process under load, ~6 µs each to decide) are counted per
        process in ``unclassified`` instead of becoming verdicts: a signal cut their evidence short,
        and the summary must be out within a second of it."""
        self._deadline, self._late, self._since_clock = deadline, False, 0
        try:
            self._advance(final=True)
        finally:
            self._deadline = None
        self.out.sort(key=_BY_TS)  # (C-level key: the stop sorts a backlog of verdicts)

    def _out_of_time(self) -> bool:
        """Past the flush's deadline (the clock read every 64 decisions)."""
        if self._deadline is None:
            return False
        if not self._late:
            self._since_clock += 1
            if self._since_clock >= 64:
                self._since_clock = 0
                self._late = time.monotonic() > self._deadline
        return self._late

    def _unclassified(self, pid: int, op: str | None, ret: int | None) -> None:
        """One I/O counted, not decided (tally.Unclassified, as the stop's tally of the events it
        could not classify, live.py)."""
        if op is None:
            count_unclassified(self.unclassified, pid)
            return
        count_unclassified(self.unclassified, pid, 1, 1, max(ret or 0, 0), read=op == "read")

    def drain(self) -> list[schema.IoLine]:
        out, self.out = self.out, []
        return out

    def waiting(self) -> dict[int, list[int]]:
        """The file I/Os not decided yet, per process: {pid: [I/Os, bytes]}: reads whose bytes a CUDA
        copy may still take (for the data-flow window: 3 s, 30 s before the job's first copy), host
        I/O held for libcufile's call, cuFile calls waiting for their evidence. What a live view
        shows as "waiting for evidence" instead of a guess (O(held): called once per interval)."""
        out: dict[int, list[int]] = {}

        def add(pid: int, size: int) -> None:
            row = out.get(pid)
            if row is None:
                row = out[pid] = [0, 0]
            row[0] += 1
            row[1] += max(size, 0)

        for io in self.held:
            if io.path is not None:
                add(io.e.pid, io.size)
        for pid, q in self.flow.by_pid.items():
            for src in q:
                if not src.finished:
                    add(pid, src.size)
        pending = self.pending
        for calls in (*pending.inflight.values(), *pending.ended.values(), *pending.orphans.values()):
            for p in calls:
                if p.op is not None:
                    add(p.pid, p.size)
        return out

    def _path_ok(self, path: str | None) -> bool:
        if self.path_filter is None:
            return True
        return path is not None and path != "" and (path.rstrip("/") + "/").startswith(self.path_filter)

    def _verdict(self, p: _Pending) -> schema.IoLine:
        path = p.path or self.handles.get((p.pid, p.handle), (None, None))[1]
        ev = []
        for k, n in p.evidence.items():  # (a loop: a comprehension is a function call before 3.12)
            ev.append(k if n == 1 else f"{k} ×{n}")
        route, sub, conf, notes = decide_once(p.kinds)  # evidence.ROUTE_RULES: the one table
        if notes:
            ev += notes
        lat = (p.t_end - p.t_start) if p.t_end is not None else None
        self._proc(p.pid, p.comm)["ios"] += 1
        return io_line(
            p.t_start,
            p.pid,
            p.tid,
            p.comm,
            p.api,
            p.op or "?",
            path,
            p.offset,
            p.size,
            p.ret,
            lat,
            route,
            sub,
            conf,
            ev,
        )

    # -- verdicts of the data-flow model -----------------------------------------------------------
    def _emit(self, v: schema.IoLine, cached: int = 0, filled: int = 0, how: str = "", inferred: bool = False) -> None:
        """Every verdict goes out here, and into the per-file account (file_summary)."""
        path = was = v["path"]
        if self._renames and path:
            final = self._final_name(path, v["ts"])
            if final != path:
                verb = "written" if v["op"] == "write" else "read"
                v["path"] = path = final
                v["evidence"] = [*v["evidence"], f"{verb} as {was}, renamed to {final}"]
        self.out.append(v)
        if not path:
            return
        n = v["size"]
        if n < 0:
            n = 0
        off = v["offset"]
        t0 = v["ts"]
        f = self._account(
            path,
            1,
            n,
            v["route"],
            v["api"],
            v["pid"],
            off + n if off >= 0 else 0,
            t0,
            t0 + (v["latency_ns"] or 0),
            (v["tid"],),
        )
        if was != path:
            names = f.setdefault("renamed_from", [])
            if was not in names and len(names) < RENAMED_FROM_MAX:
                names.append(was)
        if cached:
            f["page_cache_bytes"] += cached
        if filled:
            f["device_fill_bytes"] += filled
        if how:
            f["how"].add(how)
        if inferred:
            f["inferred"] = True  # (file_summary: its split with other files is inferred)
        if v["route"] == Route.UNKNOWN and "unknown_why" not in f and v["evidence"]:
            f["unknown_why"] = v["evidence"][-1]  # (file_summary names its own reason, not a stock one)

    def _account(
        self,
        path: str,
        ios: int,
        nbytes: int,
        route: str,
        api: str,
        pid: int,
        end: int,
        t0: int = 0,
        t1: int = 0,
        tids: Iterable[int] = (),
    ) -> dict:
        """IOS verdicts of NBYTES by PID through API on ROUTE, reaching file offset END, into PATH's
        account (file_summary); the account. T0..T1: when they started and ended (0: not known, the
        kernel's counts), TIDS the threads that made them."""
        f = self.files.get(path)
        if f is None and len(self.files) >= MAX_FILES:
            path = "(other files)"  # (a data set of millions of files: the account stays bounded)
            f = self.files.get(path)
        if f is None:
            f = self.files[path] = {
                "path": path,
                "ios": 0,
                "bytes": 0,
                "routes": {},
                "page_cache_bytes": 0,
                "device_fill_bytes": 0,
                "via": set(),
                "pids": set(),
                "how": set(),
                "max_offset": 0,
                "via_to_gpu": set(),
                "by_pid": {},
                "first_ns": 0,
                "last_ns": 0,
                "tids": set(),
            }
        if t0:
            if not f["first_ns"] or t0 < f["first_ns"]:
                f["first_ns"] = t0
            if t1 > f["last_ns"]:
                f["last_ns"] = t1
        if tids and len(f["tids"]) < MAX_FILE_TIDS:
            f["tids"].update(tids)
        f["ios"] += ios
        f["bytes"] += nbytes
        routes = f["routes"]
        routes[route] = routes.get(route, 0) + nbytes
        # (per process as well: tree_summary gives each tree the bytes its own processes moved)
        _add_pid_bytes(f, pid, route, nbytes)
        name = "cuFile" if api.startswith("cuFile") else api  # ("mmap" is its own api)
        f["via"].add(name)
        if route != Route.HOST and route != Route.UNKNOWN:
            f["via_to_gpu"].add(name)  # (what moved the bytes that reached a GPU: the why's "how")
        if len(f["pids"]) < MAX_FILE_PIDS:
            f["pids"].add(pid)
        if end > f["max_offset"]:
            f["max_offset"] = end
        return f

    def add_counted(self, rows: list[dict]) -> None:
        """The host I/O the kernel counted (counted.CountedIo.rows: processes without CUDA, no line
        each) into the per-file and per-tree accounts, as the route totals have them: one set of
        books (issue 43: a summary said HOST 49.0MiB and, below it, 32M per file and per tree). Its
        file offsets are not known: the extent stays what the per-I/O lines reached."""
        for r in rows:
            f = self._account(r["path"], r["count"], r["bytes"], r["route"], r["api"], r["pid"], 0)
            was = r.get("renamed_from")  # (the row's file was opened by another name: _on_rename)
            if was:
                names = f.setdefault("renamed_from", [])
                if was not in names and len(names) < RENAMED_FROM_MAX:
                    names.append(was)
            if r.get("lost"):
                # (its records dropped, ring full: said apart from the file's other UNKNOWN bytes,
                # whose reason stays its own; via keeps the api, as its sent I/Os have it)
                lost = f.setdefault("lost_in_kernel", {"ios": 0, "bytes": 0})
                lost["ios"] += r["count"]
                lost["bytes"] += r["bytes"]
                continue
            f["via"].discard(r["api"])
            if r.get("why") and "unknown_why" not in f:
                f["unknown_why"] = r["why"]
            f["via"].add(f"{r['api']} (counted in the kernel)")

    def _take_flow(self) -> None:
        flow = self.flow
        if not (flow.done or flow.chunks or flow.expired_fills):
            return
        done, chunks, fills = flow.take_done()
        for src in done:
            io = src.payload
            if isinstance(io, _HostIo):
                if self._deadline is not None and self._out_of_time():
                    self._unclassified(io.e.pid, io.op, io.ret)
                    continue
                if self.pending and self._match_syscall(io):
                    continue  # libcufile's own pread after all (its call was seen late)
            self._emit(*self._source_verdict(src))
        for ch in chunks:
            self._emit(*self._chunk_verdict(ch))
        for mf, path, pid, ts, lo, hi, lat, e in fills:
            self._emit(*self._fill_verdict(mf, path, pid, ts, lo, hi, lat, e))

    def _copy_text(self, c: Sequence[int], t: int, how: str, link: str = "", checked: int = -1) -> str:
        ts, pid, dst, src, n = c[:5]
        dt = (ts - t) / 1e6
        when = (
            "which took these bytes of the mapping"
            if t == ts
            else f"{dt:+.3f} ms after it"
            if dt >= 0
            else f"started {-dt:.3f} ms before (it faulted these pages in)"
        )
        text = f"CUDA copy host {src:#x} -> GPU {dst:#x}, {n} bytes, {when}"
        if how == "staged":
            text += " from another host buffer (staged through host memory; the CPU copy into it is not traced)"
        elif how == "job":
            comm = self._proc(pid)["comm"] or "?"
            text += f" by {comm}/{pid}, another process of the same traced tree; {link}"
        if how in ("staged", "job"):
            text += "; " + (
                _checked_text(checked)
                if checked >= 0
                else _by_order_text(c, self.content.live or bool(self.content.recorded))
            )
        return text

    def _elsewhere_text(self, c: list, left: int, t: int, text: bool = False) -> str:
        """Why a read is UNKNOWN (DataFlow.unexplained): the first copy of its job after it that no
        read explained, and those copies' bytes. TEXT: a text file (dataflow.text_data) no staged
        copy takes; else a process without CUDA."""
        who = self._proc(c[1])["comm"] or "?"
        copy = (
            f"{who}/{c[1]} copied host {c[3]:#x} -> GPU {c[2]:#x}, {c[4]} bytes, {(c[0] - t) / 1e6:+.3f} ms after "
            f"it, and the job's copies in its window {left} bytes from memory no traced read explains"
        )
        if text:
            return (
                f"a text file, which no copy is paired with by order (configs and vocabularies are read by every "
                f"program), but {copy}: a parse of this text may have made them, or not; the trace cannot tell"
            )
        return (
            f"this process loaded no CUDA library, but in its traced tree {copy}: these bytes may have reached "
            "it through shared memory or a pipe, or not at all; the trace cannot tell (a process without CUDA is "
            "not paired with copies by order)"
        )

    def copied_elsewhere(
        self, pid: int, first_ts: int, path: str, nbytes: int, writers: Container[int] = ()
    ) -> str | None:
        """For I/O the kernel counted (counted.CountedIo: a process without CUDA), why its route is
        UNKNOWN rather than HOST: copies of its job after its first such I/O that no traced read
        explained, at least 1/16 of its NBYTES (DataFlow.unexplained; the per-I/O reads of such a
        process, and text files' reads, end the same way). None: HOST, as for a process that writes
        data files (cp, tar: a host tool whose bytes went to a file; WRITERS: the processes the kernel
        counted writes of)."""
        if self._host_tool(pid, writers):
            return None
        hit = self.flow.elsewhere(pid, self.job_of(pid), path, first_ts, 1 << 63, nbytes)
        if hit is None:
            return None
        c, left = hit
        return self._elsewhere_text(c, left, first_ts, text=not staged_ok(path))

    def _host_tool(self, pid: int, writers: Container[int] = ()) -> bool:
        """A process without CUDA that wrote data files (WRITERS: those the kernel counted writes
        of): a copy or archive tool (cp, tar), whose reads stay HOST where DataFlow.elsewhere would
        make them UNKNOWN."""
        return pid not in self.cuda_procs and (pid in self.wrote_data or pid in writers)

    def _source_verdict(self, src: Source) -> tuple:
        io = src.payload
        assert isinstance(io, _HostIo)
        e = io.e
        head = f"{io.api} fd {e.args[0]} into host memory {io.buf:#x}" if io.buf else f"{io.api} fd {e.args[0]}"
        ev = [head + f" ({io.note})" if io.note else head]
        # a copy from the read's own buffer ties it to the GPU whatever part it copied (the address proves
        # it); an inferred (staged) tie needs at least half of its bytes taken
        if src.copy is not None and (src.how == "direct" or src.consumed * 2 >= max(src.size, 1)):
            ev.append(self._copy_text(src.copy, e.ts, src.how, src.link, src.checked))
            if src.copies > 1 or src.consumed < src.size:
                ev.append(f"{src.consumed} of its {src.size} bytes taken by {src.copies} CUDA copies")
            route = Route.DRAM_BOUNCE
            # High where the address or the bytes prove it. A staged pairing not checked by content is
            # inferred from order and sizes, and a program that reads 4 MiB chunks only to sum them
            # while it copies other 4 MiB buffers to the GPU makes the same order and sizes (held-out
            # host-stats, issue 43's checksum loop): low.
            conf = "high" if src.how == "direct" or src.checked >= 0 else "low"
            if io.buf is None and src.how == "direct":
                conf = "medium"  # (no buffer address traced: io_uring, version-1 records of the v-forms)
            elif src.how == "staged" and src.exact and src.checked < 0:
                ev.append("one read, then one copy of exactly its size: paired one to one")
            how = src.how
            if src.rivals:
                conf = "low"
                ev.append(_rivals_text(src.rivals))
        elif src.changed is not None or src.differs is not None:  # (content: copies that were not its bytes)
            route, conf, how = Route.UNKNOWN, "low", ""
            ev.append(_differs_text(src, e.ts))
        elif src.recopy is not None:  # (DataFlow.recopies: which bytes that copy carried is not known)
            route, conf, how = Route.DRAM_BOUNCE, "low", "staged"
            c = src.recopy
            ev.append(
                _copy_brief(c, e.ts)
                + ", from a buffer whose read's bytes copies had all taken already: either these bytes, put there by "
                "the CPU (a reused buffer: decoded or gathered, not traced), or the same bytes again (to a second "
                "GPU); inferred from order, no copy took this read's bytes otherwise"
            )
        elif src.with_file is not None:  # (DataFlow.staged_files: a decode changes sizes)
            route, conf, how = Route.DRAM_BOUNCE, "low", "staged"
            ev.append(
                self._copy_text(src.with_file, e.ts, "staged")
                + "; it took other bytes of this file, read before it: a decode changes sizes (text parsed into "
                "numbers), so this read's bytes may be behind it too; inferred from order"
            )
        elif src.elsewhere is not None and not self._host_tool(e.pid):  # (DataFlow.elsewhere)
            route, conf, how = Route.UNKNOWN, "low", ""
            c, left = src.elsewhere
            ev.append(self._elsewhere_text(c, left, e.ts, text=not src.ok))
        else:
            route, conf, how = Route.HOST, "medium", ""
            if src.consumed:
                ev.append(f"only {src.consumed} of its {src.size} bytes were followed by a CUDA copy")
            ev.append(
                "host I/O, not on the GPU data path: "
                + ("no CUDA copy took its bytes" if self.memcpy.get(e.pid) else "the process made no CUDA copy")
            )
            if src.passed_over:
                conf = "low"
                ev.append(
                    "HOST by elimination: a CUDA copy from a staging buffer took file bytes of this job while "
                    "this read waited, inferred from order among several files; they could have been these"
                )
        inferred = (
            bool(src.rivals)
            or src.passed_over
            or src.recopy is not None
            or src.with_file is not None
            or route == Route.UNKNOWN
            or (route == Route.DRAM_BOUNCE and conf == "low")  # (staged, by order only)
        )
        return self._host_line(io, route, conf, ev), 0, 0, how, inferred

    def _chunk_verdict(self, ch) -> tuple:
        mf: MappedFile = ch.mf
        size = ch.hi - ch.lo
        filled = mf.filled.overlap(ch.lo, ch.hi)
        cached = size - filled
        addr = next((a + ch.lo - off for a, ln, off in mf.maps if off <= ch.lo < off + ln), None)
        ev = [
            "mmap'd file" + (f" at host {addr:#x}" if addr is not None else ""),
            (
                "page cache, no device I/O"
                if not filled
                else f"{filled} bytes filled from the device during the trace"
                + (f", {cached} from the page cache" if cached else "")
            ),
            self._copy_text(ch.copy, ch.ts, ch.how, ch.link, ch.lo if ch.checked else -1),
        ]
        conf = "high" if ch.how == "direct" or ch.checked else "low"
        if ch.rivals:
            conf = "low"
            ev.append(_rivals_text(ch.rivals))
        p = self._proc(mf.pid)
        p["ios"] += 1
        line = io_line(
            ch.ts,
            mf.pid,
            mf.pid,
            p["comm"] or "",
            "mmap",
            "read",
            mf.path,
            ch.lo,
            size,
            size,
            None,
            Route.DRAM_BOUNCE,
            "page-cache" if not filled else None,
            conf,
            ev,
        )
        return line, cached, filled, ch.how, bool(ch.rivals) or conf == "low"

    def _fill_verdict(self, mf, path: str, pid: int, ts: int, lo: int, hi: int, lat: int, e: Event) -> tuple:
        what = (
            "page-cache fill of a mmap'd file"
            if mf is not None
            else "page-cache fill with no read or mapping of it in this process (readahead or fadvise "
            "no read followed, or a mapping made before the trace)"
        )
        ev = [what, "host I/O, not on the GPU data path: no CUDA copy took these bytes"]
        p = self._proc(pid, e.comm)
        p["ios"] += 1
        line = io_line(
            ts,
            pid,
            e.tid,
            e.comm or p["comm"] or "",
            "mmap",
            "read",
            path,
            lo,
            hi - lo,
            hi - lo,
            lat,
            Route.HOST,
            None,
            "medium",
            ev,
        )
        return line, 0, hi - lo, ""

    def file_summary(self) -> list[dict]:
        """Per file: its bytes per route, how they got there, and why — the user's question, answered."""
        out = []
        for f in sorted(self.files.values(), key=lambda f: -f["bytes"]):
            total = f["bytes"] or 1
            r = f["routes"]
            p2p = sum(n for k, n in r.items() if Route(k).is_p2p)
            bounce = r.get(Route.DRAM_BOUNCE, 0)
            host = r.get(Route.HOST, 0)
            compat = r.get(Route.COMPAT, 0)
            mm = f["page_cache_bytes"] + f["device_fill_bytes"]
            why = []
            if bounce:
                via = "mmap" if "mmap" in f["via"] else "read"
                why.append(
                    "no cuFile call: the program "
                    + ("mapped the file" if via == "mmap" else "read it into host memory")
                    + " and copied it to the GPU"
                    + (" through a host staging buffer" if "staged" in f["how"] else "")
                    + (" (read by one process of the job, copied by another)" if "job" in f["how"] else "")
                )
            if compat:
                why.append("cuFile ran in compatibility mode (POSIX I/O through libcufile's bounce buffers)")
            if p2p:
                why.append("cuFile took a P2P route")
            if host and not (bounce or compat or p2p):
                why.append("no CUDA copy took these bytes: host I/O, not on the GPU data path")
            lost = f.get("lost_in_kernel")
            if r.get(Route.UNKNOWN, 0) > (lost["bytes"] if lost else 0):
                # (the reason its first UNKNOWN line gave: a copy that was not its bytes, a buffer
                # overwritten, bytes that may have gone through shared memory; the stock text was the
                # last one's alone, and said so of a checksummed file too)
                why.append(
                    "not known: " + f["unknown_why"]
                    if f.get("unknown_why")
                    else "not known: host memory no traced read explains went to a GPU after these reads, and "
                    "they were not paired with it (a text file, or a process without CUDA); the I/O lines name the copy"
                )
            if lost:
                why.append(
                    f"not known: {lost['ios']} I/Os ({size_text(lost['bytes'])}) have no per-I/O detail (the events "
                    "ring was full: the kernel counted them with their file and bytes, their route is not known)"
                )
            unused = self._cufile_unused(f["pids"]) if bounce or host else None
            if unused:
                why.append(unused)
            if f.get("inferred") and any(self.job_of(pid) in self.flow.passed_over_jobs for pid in f["pids"]):
                why.append(
                    "not known for certain: copies from a staging buffer took file bytes while bytes of several "
                    "files were waiting, and some of those were never copied; which file's bytes reached the "
                    "GPU is inferred from order (the I/O lines say low)"
                )
            row = {
                "path": f["path"],
                "ios": f["ios"],
                "bytes": f["bytes"],
                "extent": f["max_offset"],
                "routes": dict(r),
                "to_gpu_share": round((bounce + compat + p2p) / total, 4),
                "p2p_share": round(p2p / total, 4),
                "page_cache_hit": round(f["page_cache_bytes"] / mm, 4) if mm else None,
                **self._major_faults(f, mm),
                "via": sorted(f["via"]),
                "pids": sorted(f["pids"]),
                "how": sorted(f["how"]),
                "why": "; ".join(why),
                "mechanism": describe(
                    sorted(f["via"]),
                    self._opens(f["path"], f.get("renamed_from")),
                    len(f["tids"]),
                    bool(unused),
                ),
                "via_to_gpu": sorted(f["via_to_gpu"]),
                "threads": len(f["tids"]),
                "gbps": rate(f["bytes"], f["first_ns"], f["last_ns"]),
            }
            ceil = self.node.ceilings(f["path"], bool(bounce or compat or p2p)) if self.node is not None else None
            row["ceiling"] = ceil.to_json() if ceil is not None else None
            row["against_ceiling"] = ceil.against(row["gbps"]) if ceil is not None and row["gbps"] else None
            called = any(self.cufile_calls.get(pid) for pid in f["pids"])
            chain, fix = file_why(row, self.node, unused, self.program_said(f["pids"]), called, self.node_missing)
            row["why_chain"], row["fix"] = [x.to_json() for x in chain], fix
            out.append(row)
            if f.get("renamed_from"):
                out[-1]["renamed_from"] = list(f["renamed_from"])
            if lost:
                out[-1]["lost_in_kernel"] = dict(lost)
        return out

    def _major_faults(self, f: dict, mm: int) -> dict:
        """The file's major page faults (under its names in the trace) and their rate per GiB of the
        bytes its mappings brought in (MM: filled from the device and taken from the page cache);
        None where faults were not counted, or nothing came through a mapping."""
        if self.major_faults is None or not mm:
            return {"major_faults": None, "major_faults_per_gib": None}
        n = sum(self.major_faults.get(p, 0) for p in (f["path"], *f.get("renamed_from", ())))
        return {"major_faults": n, "major_faults_per_gib": round(n / (mm / (1 << 30)), 1)}

    def _opens(self, path: str, was: list[str] | None) -> tuple[int, int]:
        """(opens with O_DIRECT, opens) of PATH under its names in the trace."""
        d = n = 0
        for p in (path, *(was or ())):
            got = self.opens_of.get(p)
            if got:
                d, n = d + got[0], n + got[1]
        return d, n

    def needs_node_facts(self, gpu_program: bool = False) -> bool:
        """Whether a file's why will ask for the node's facts (trace/why.py: its COMPAT or
        DRAM_BOUNCE bytes), or the trace's answer for bytes it cannot see: a GPU_PROGRAM (it mapped
        libcuda or libcufile) none of whose file bytes the trace saw reach a GPU (check/why.py
        untraced_why: a kernel-bypass NVMe driver or cuObject over RDMA on the node)."""
        if any(f["routes"].get(Route.COMPAT) or f["routes"].get(Route.DRAM_BOUNCE) for f in self.files.values()):
            return True
        return gpu_program and not any(Route(k).is_p2p for f in self.files.values() for k in f["routes"])

    def _cufile_unused(self, pids) -> str | None:
        """'libcufile loaded, no cuFile I/O' for the file's processes that loaded libcufile (mapped
        it, or called it to open the driver or ask its version) and never read or wrote through it:
        a loader's own non-GDS fallback (it tried GDS, or only linked it, and moved the bytes itself)."""
        for pid in sorted(pids):
            if pid in self.cufile_io_pids:
                continue
            calls = self.cufile_calls.get(pid)
            if not calls and pid not in self.libcufile_pids:
                continue
            who = f"{self._proc(pid)['comm'] or '?'}/{pid}"
            text = f"libcufile loaded, no cuFile I/O: {who} loaded libcufile"
            if calls:
                rc = calls.get("cuFileDriverOpen")
                if "cuFileDriverOpen" in calls:
                    text += (
                        ", opened the driver"
                        if rc == 0
                        else f", its cuFileDriverOpen failed ({_cufile_error(rc)})"
                        if rc is not None
                        else ", called cuFileDriverOpen"
                    )
                others = sorted(k for k in calls if k != "cuFileDriverOpen")
                if others:
                    text += " and called " + ", ".join(others)
            return text + ", and read these bytes itself (the program's own non-GDS path, not cuFile)"
        return None

    def tree_summary(self) -> list[dict]:
        """Per traced process tree (job): the bytes of its files on each route."""
        jobs: dict[int, dict] = {}
        for f in self.files.values():
            # (by_pid holds the file's processes, as pids does: a process past MAX_FILE_PIDS of the
            # file counts under the lowest of them in both)
            for pid, routes in f["by_pid"].items():
                j = self.job_of(pid)
                tree = jobs.get(j)
                if tree is None:
                    tree = jobs[j] = {"root": j, "comm": self._proc(j)["comm"], "pids": set(), "routes": {}}
                tree["pids"].add(pid)
                for k, n in routes.items():
                    tree["routes"][k] = tree["routes"].get(k, 0) + n
        return [{**d, "pids": sorted(d["pids"])} for d in jobs.values()]

    def _copy_of(self, io: _HostIo):
        """The device-to-host CUDA copy whose bytes this write put in the file: into its buffer before
        it (the nearest wins: a buffer reused is filled again); with the buffer address unknown
        (io_uring, version-1 records of the v-forms) or in a later iovec, by direction and size; else a
        copy of its size into another buffer (staged). Reads are the data-flow model's (dataflow.py)."""
        copies = self.memcpy.get(io.e.pid)
        if not copies or io.op != "write" or io.api in IN_KERNEL:
            return None, None
        t = io.e.ts
        lo = t - COPY_WINDOW_NS
        end = io.buf + max(io.size, 1) if io.buf is not None else None
        best = None
        for c in copies:
            if not lo <= c.ts <= t:
                continue
            dst, src, n, d = (c.args + [0, 0, 0, 0])[:4]
            if d not in (2, 0) or n <= 0:
                continue
            if io.buf is not None:
                if dst < end and io.buf < dst + n and (best is None or c.ts > best.ts):
                    best = c
            elif d == 2 and n == io.size and best is None:
                best = c
        if best is not None:
            return best, "high" if io.buf is not None else "medium"
        # What follows is inferred, not seen: each copy's bytes are given to one write only (a copy
        # of 1 MiB made 20 writes of 1 MiB of host data DRAM_BOUNCE before), the nearest first.
        taken = self._copy_taken
        # a v-form with several iovecs: only the first one's base is traced (torch.save writes a zip
        # header and the tensor's bytes in one writev); a copy that fits in the I/O's bytes, the nearest
        if io.api in VFORMS and len(io.e.args) > 2 and io.e.args[2] > 1:
            fits = [
                c
                for c in copies
                if lo <= c.ts <= t
                and (c.args + [0] * 4)[3] == 2
                and 0 < c.args[2] <= io.size
                and (c.pid, c.tid, c.ts) not in taken
            ]
            if fits:
                return self._take_copy(max(fits, key=lambda c: c.ts)), "iovec"
        staged = [
            c
            for c in copies
            if lo <= c.ts <= t
            and (c.args + [0] * 4)[3] == 2
            and (c.args + [0] * 3)[2] == io.size
            and (c.pid, c.tid, c.ts) not in taken
        ]
        if staged:
            return self._take_copy(max(staged, key=lambda c: c.ts)), "staged"
        return None, None

    def _take_copy(self, c: Event) -> Event:
        """C's bytes are spoken for by the write an inference gave them to (bounded: only copies
        within COPY_WINDOW_NS of a write are ever asked about)."""
        taken = self._copy_taken
        if len(taken) >= 65_536:
            old = self.now - COPY_WINDOW_NS
            taken.difference_update([k for k in taken if k[2] < old])
        taken.add((c.pid, c.tid, c.ts))
        return c

    def _host_verdict(self, io: _HostIo) -> schema.IoLine:
        e = io.e
        # (the held I/O are writes and in-kernel copies: reads with a buffer are the data-flow model's)
        ev = [f"{io.api} fd {e.args[0]}" + (f" from host memory {io.buf:#x}" if io.buf else "")]
        if io.note:
            ev.append(io.note)
        c, conf = self._copy_of(io)
        if c is not None:
            dst, src, n, d = (c.args + [0, 0, 0, 0])[:4]
            dt = (c.ts - e.ts) / 1e6
            how = {
                "high": "",
                "medium": " (buffer address not traced: matched by direction and size)",
                "iovec": f" from one of its {e.args[2]} iovecs (only the first one's address is traced: matched by "
                "direction and a size within the I/O's)",
                "staged": " into another host buffer of the same size (staged, e.g. through pinned memory)",
            }[conf]
            ev.append(f"CUDA copy GPU {src:#x} -> host {dst:#x}, {n} bytes, {-dt:.3f} ms before it{how}")
            conf = {"staged": "medium", "iovec": "medium"}.get(conf, conf)
            route = Route.DRAM_BOUNCE
        else:
            route, conf = Route.HOST, "medium"
            ev.append(
                "host I/O, not on the GPU data path: "
                + ("no CUDA copy of its buffer" if self.memcpy.get(e.pid) else "the process made no CUDA copy")
            )
            big = self._larger_copy(io)
            if big is not None:
                # (a GPU buffer brought to the host whole and written out in pieces from another buffer:
                # only a copy of the write's own size is inferred to be it, so this is not known)
                conf = "low"
                ev.append(
                    f"a CUDA copy GPU -> host {big.args[0]:#x} of {big.args[2]} bytes, "
                    f"{(e.ts - big.ts) / 1e6:.3f} ms before it, went to no write: this write's bytes may be "
                    "part of it (a copy is matched to a write from another buffer only by the same size)"
                )
        return self._host_line(io, route, conf, ev)

    def _larger_copy(self, io: _HostIo):
        """The nearest device-to-host copy of this process in the window before write IO, larger
        than it, into another buffer, whose bytes no write was inferred to carry; or None."""
        copies = self.memcpy.get(io.e.pid)
        if not copies or io.op != "write":
            return None
        t, taken = io.e.ts, self._copy_taken
        lo = t - COPY_WINDOW_NS
        best = None
        for c in copies:
            a = c.args
            if (
                lo <= c.ts <= t
                and len(a) > 3
                and a[3] == 2
                and a[2] > io.size
                and (c.pid, c.tid, c.ts) not in taken
                and (best is None or c.ts > best.ts)
            ):
                best = c
        return best

    def _host_line(self, io: _HostIo, route: Route, conf: str, ev: list[str]) -> schema.IoLine:
        """The verdict line of a host I/O (a read the data-flow model decided, or a write)."""
        e = io.e
        p = self.procs.get(e.pid)
        if p is None or (e.comm and not p["comm"]):
            p = self._proc(e.pid, e.comm)
        p["ios"] += 1
        return io_line(
            e.ts,
            e.pid,
            e.tid,
            e.comm,
            io.api,
            io.op,
            io.path,
            io.offset,
            io.size,
            io.ret,
            io.latency,
            route,
            None,
            conf,
            ev,
        )


def _moved(path: str, old: str, new: str) -> str | None:
    """PATH once OLD is renamed NEW (PATH is OLD, or under it when OLD is a directory); None when the
    rename does not touch it."""
    if path == old:
        return new
    if path.startswith(old) and path[len(old) : len(old) + 1] == "/":
        return new + path[len(old) :]
    return None


def classify(events: list[Event], path_filter: str | None = None, record_version: int = 2) -> list[schema.IoLine]:
    """The whole stream at once (replay): events are ordered by time first."""
    c = Classifier(path_filter, record_version)
    answers = recorded_answers(e for e in events if e.kind == "content")
    if answers:
        c.use_content(ContentCheck(recorded=answers))
    for e in sorted(events, key=lambda e: e.ts):
        c.feed(e)
    c.flush()
    verdicts = c.drain()
    if c.path_filter:
        verdicts = [v for v in verdicts if v["path"] is None or c._path_ok(v["path"])]
    return verdicts
