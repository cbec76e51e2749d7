"""Where file bytes go on their way to a GPU: the trace's data-flow model (pure; no I/O, no probes).

A host I/O outside cuFile (read-family syscalls, Linux AIO, io_uring, page-cache fills of a mapped
file, the pages of a mapping that were already cached) puts *file bytes in host memory*: a
``Source``. A host-to-device CUDA copy takes bytes out of host memory: it *consumes* sources. What a
copy consumes decides the route of the source's bytes: consumed → DRAM_BOUNCE, never consumed within
the window → HOST. Which source a copy consumes, strongest evidence first:

1. **direct** — the copy's host range overlaps the source's buffer (a read's buffer, a mapping of the
   file): exact bytes and file offsets, high confidence;
2. **staged, same process** — the bytes went through a host staging buffer first (a CPU copy into
   pinned memory, a decode, a tensor made from mapped bytes). A CPU copy is invisible to the probes,
   so this is inferred from order: the process's oldest file bytes not yet consumed, within the
   window: medium (one read then one copy of its size too: the line says so);
3. **staged, same job** — another process of the traced tree (a data-loader worker) read the bytes;
   the copying process has no unconsumed file bytes of its own: medium, with the link that was seen
   (a mapping of a descriptor the copier never opened: shared memory passed to it), or, none seen, the
   job's byte accounting.

A mapped file is one source per (process, file) with an interval set of its file offsets: what the
trace saw filled (device I/O) and what copies consumed; bytes consumed that were never filled came
from the page cache ("page cache, no device I/O"), so a warm model load is reported with its bytes.
Page-cache fills of a file the process has not mapped (readahead, fadvise WILLNEED) belong to the read
that follows them: a later read of that range absorbs them; what no read claims within the window is
reported on its own (a mapping made before the trace, say). Every byte of a file is put on a route
once per time it really entered host memory; a copy that consumes bytes already consumed adds none.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .content import FLAG_CHANGED, ContentCheck, CopySample, Verdict, compare

WINDOW_NS = 3_000_000_000  # file bytes in host memory this old, never copied, are HOST
# … unless no process of the job has made a CUDA copy yet: a program often reads its data before it
# initialises the GPU (JAX's backend took 3.8 s to come up after the read on the GPU machine; a model
# is built before its weights are copied), so until the job's first copy its bytes wait this long
FIRST_COPY_WINDOW_NS = 30_000_000_000
# … and where no process of the job has opened a CUDA library, no copy can come: its reads are
# decided after this (with --per-io a host program's first line came 30 s after its I/O, issue 46).
# A job that loads CUDA only after reading its data loses that data's DRAM_BOUNCE (said in docs/trace.md)
NO_CUDA_WINDOW_NS = 500_000_000
MAX_COVER = 65_536  # read ranges kept per (process, file) to absorb readahead
MAX_WAITING = 65_536  # file reads of one process waiting for a copy at most (older ones are HOST)
MAP_IDLE_NS = 30_000_000_000  # a mapped file no copy touched for this long is forgotten (a warm load may
# map its files, then build the model for seconds before the first copy; its fills are reported at WINDOW_NS)
DIRECT_SCAN = 256  # reads searched newest first for a copy that starts inside (not at) their buffer
GRANULE_SHIFT = 20  # RecentReads files buffers by the 1 MiB granules of address space they touch
MAX_GRANULES = 1024  # a buffer (or copy) over more granules than this: tested one by one instead
MAP_SETTLE_NS = 250_000_000  # a copy from a mapping faults pages in as it runs: wait for those fills
RECOPIES_KEPT = 64  # a job's latest copies of a buffer already taken (DataFlow.recopies)
MIN_STAGED_COPY = 4096  # smaller copies (kernel arguments, scalars) never stand for file data
RIVAL_SCAN = 16  # waiting reads of each process a staged copy looks at for bytes of other files
ABSORB_MIN = 4096  # readahead left over after the reads (a few bytes at the file's start): dropped
# a read whose bytes copies took stays findable by its buffer (DataFlow.by_page) this long after its
# first copy: the buffer copied again (to a second GPU) adds nothing, and is no staged copy
RETAIN_NS = 250_000_000
SWEEP_MIN = 4096  # by_page is swept of reads past RETAIN_NS when it is larger than this (and twice its last size)


# Files a staging inference never takes bytes from: the system's and the interpreter's own files and
# text configs (an OpenSSL config, a package's METADATA, the locale archive, a tokenizer.json) are read
# by every GPU program and are not what it copies to the GPU. A copy *from* their buffer (direct) still
# counts: the address proves it. CSV and JSON Lines are data sets, parsed and then copied (held-out
# csv-numpy and jsonl-tokens, real captures: their bytes were host I/O while they were listed here).
SYSTEM_RE = re.compile(r"^/(usr|etc|lib|lib32|lib64|bin|sbin|boot|var/lib/(dpkg|apt))/|/(site|dist)-packages/")
NOT_STAGED_RE = re.compile(
    SYSTEM_RE.pattern
    + r"|\.(dist|egg)-info/"
    + r"|\.(json|txt|md|ya?ml|toml|cfg|conf|cnf|ini|py|pyc|so(\.\d+)*|cache|xml|html|log|lock)$",
    re.IGNORECASE,
)


# Of the files a staged copy never takes bytes from, the text a program may parse and copy: a token
# corpus as .txt, a data set as .json (held-out txt-tokens: its ids parsed line by line were copied;
# its reads were host I/O at medium). A tokenizer's vocab.txt or a model's config.json looks the same.
# Such a read that no copy took ends UNKNOWN where host memory no read explains went to a GPU after it
# (DataFlow.unexplained), at least 1/UNEXPLAINED_SHARE of its bytes.
TEXT_DATA_RE = re.compile(r"\.(txt|json)$", re.IGNORECASE)
UNEXPLAINED_SHARE = 16


def text_data(path: str) -> bool:
    """Text a program may parse into what it copies to a GPU (TEXT_DATA_RE), outside the system's
    and the interpreter's own files."""
    return TEXT_DATA_RE.search(path) is not None and SYSTEM_RE.search(path) is None


_STAGED_OK: dict[str, bool] = {}


def staged_ok(path: str) -> bool:
    ok = _STAGED_OK.get(path)
    if ok is None:
        if len(_STAGED_OK) > 65536:  # (bounded: a data set of millions of files)
            _STAGED_OK.clear()
        ok = _STAGED_OK[path] = NOT_STAGED_RE.search(path) is None
    return ok


class Intervals:
    """A set of [start, end) integer intervals, kept merged and sorted."""

    __slots__ = ("starts", "ends")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        i = bisect.bisect_left(self.ends, lo)
        j = i
        while j < len(self.starts) and self.starts[j] <= hi:
            lo, hi = min(lo, self.starts[j]), max(hi, self.ends[j])
            j += 1
        self.starts[i:j] = [lo]
        self.ends[i:j] = [hi]

    def remove(self, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        out_s, out_e = [], []
        for s, e in zip(self.starts, self.ends):
            if e <= lo or s >= hi:
                out_s.append(s)
                out_e.append(e)
                continue
            if s < lo:
                out_s.append(s)
                out_e.append(lo)
            if e > hi:
                out_s.append(hi)
                out_e.append(e)
        self.starts, self.ends = out_s, out_e

    def overlap(self, lo: int, hi: int) -> int:
        n = 0
        i = bisect.bisect_right(self.ends, lo)
        while i < len(self.starts) and self.starts[i] < hi:
            n += min(hi, self.ends[i]) - max(lo, self.starts[i])
            i += 1
        return n

    def gaps(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of [lo, hi) not in the set, in order."""
        out = []
        at = lo
        i = bisect.bisect_right(self.ends, lo)
        while i < len(self.starts) and self.starts[i] < hi and at < hi:
            if self.starts[i] > at:
                out.append((at, self.starts[i]))
            at = max(at, self.ends[i])
            i += 1
        if at < hi:
            out.append((at, hi))
        return out

    def items(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends))

    def total(self) -> int:
        return sum(e - s for s, e in zip(self.starts, self.ends))

    def __bool__(self) -> bool:
        return bool(self.starts)


@dataclass(slots=True)
class Source:
    """File bytes a host I/O put in host memory: a read's buffer, or what a mapping holds."""

    pid: int
    job: int
    ts: int
    path: str
    offset: int
    size: int
    buf: int | None  # host address of the bytes (None: not traced, e.g. io_uring)
    payload: object  # the classifier's record of the I/O (its verdict line is built from it)
    consumed: int = 0
    how: str = ""  # "direct" | "staged" | "job": the strongest way a copy took its bytes
    copy: list | tuple | None = None  # the first copy that consumed it: [ts, pid, dst, src, n, direction]
    copies: int = 0
    exact: bool = False  # staged one-to-one: a copy of exactly its size, nothing else pending
    link: str = ""  # for "job": the link seen between reader and copier
    ok: bool = True  # may a staged copy take its bytes (staged_ok)
    finished: bool = False  # every byte taken: out of the queue (removed lazily)
    seq: int = 0  # the order reads came in (DataFlow.add_read), for RecentReads
    # a staged copy took these bytes while bytes of other files were waiting too: which file's bytes
    # it took is inferred from order (up to three of those files)
    rivals: tuple[str, ...] = ()
    passed_over: bool = False  # never copied, though a staged copy took other files' bytes while it waited
    # never copied, though its job copied to a GPU, while it waited, a buffer whose read's bytes copies
    # had all taken: the first such copy ([ts, pid, dst, src, n, direction]; DataFlow.recopies)
    recopy: list | None = None
    # never copied, though a staged copy after it took bytes of its file (same job): that copy
    # (DataFlow.staged_files)
    with_file: list | None = None
    # never copied, of a process that loaded no CUDA library or of a text file (no staged copy takes
    # its bytes by order), while a process of its job copied host memory to a GPU that no traced read
    # explained: that copy and the bytes left unexplained (DataFlow.elsewhere)
    elsewhere: tuple | None = None
    until: int = 0  # taken and out of its queue: found by its buffer until then (RETAIN_NS)
    # content evidence (content.py): the file offset at which a staged copy's source was seen to
    # hold this read's bytes (-1: not checked), and the copies seen NOT to carry them: a staged copy
    # whose fingerprint differs from the file's bytes this read would have given it, or a copy of
    # this read's own buffer after other bytes were written into it (the probe's FLAG_CHANGED)
    checked: int = -1
    differs: list | None = None
    changed: list | None = None

    def __post_init__(self) -> None:
        self.ok = staged_ok(self.path)

    def remaining(self) -> int:
        return max(self.size - self.consumed, 0)


class TakenRead(Source):
    """A read one copy took whole, its verdict made elsewhere (hostio.HostVerdicts.bounces), kept in its
    process's queues behind reads that wait for a copy (DataFlow.add_taken): where the model's
    readers find it, a Source whose bytes are all taken. What a copy never sets on such a read is
    the class's; what DataFlow sets on it (seq, until) is its own. A bounce stream keeps one a verdict
    while its process has reads waiting; as full Sources, making and collecting them was 2.5–3 µs of
    a verdict's 8.5–10 on the dev VM. This one is made in two thirds of the time: 5–6 % of a verdict
    on the H100's recorded streams (docs/benchmarks.md, "Taken reads kept cheaply"). Its copy's
    fields are its own slots, the tuple a Source holds made only when a reader asks: one object
    fewer a verdict for the collector to walk while the read is kept."""

    __slots__ = ("t_copy", "dst", "src")  # (its copy's own fields: a tuple of them only when asked)
    payload = None
    how = "direct"
    copies = 1
    exact = False
    link = ""
    finished = True
    rivals = ()
    passed_over = False
    recopy = None
    with_file = None
    elsewhere = None
    checked = -1
    differs = None
    changed = None

    def __init__(
        self,
        pid: int,
        job: int,
        ts: int,
        path: str,
        offset: int,
        size: int,
        buf: int,
        t_copy: int,
        dst: int,
        src: int,
        ok: bool,
    ):
        self.pid, self.job, self.ts, self.path, self.offset, self.size, self.buf = pid, job, ts, path, offset, size, buf
        self.consumed, self.t_copy, self.dst, self.src, self.ok, self.seq, self.until = size, t_copy, dst, src, ok, 0, 0

    @property
    def copy(self) -> tuple:  # type: ignore[override]  # (read-only: a copy never sets it on a taken read)
        """The copy that took it, as a Source holds it: [ts, pid, dst, src, n, direction, content]; n is the
        read's size (a bounce pair's copy moves exactly the bytes its read returned:
        wholecalls.WholeCalls._bounces)."""
        return (self.t_copy, self.pid, self.dst, self.src, self.size, 1, 0)


class Taken:
    """A read whose bytes a copy took, decided elsewhere (hostio.HostVerdicts.bounces): what DataFlow._direct
    reads of a Source it finds by its buffer, finished."""

    __slots__ = ("pid", "buf", "size", "ts", "until")
    finished = True

    def __init__(self, pid: int, buf: int, size: int, ts: int, until: int) -> None:
        self.pid, self.buf, self.size, self.ts, self.until = pid, buf, size, ts, until


class RecentReads:
    """The DIRECT_SCAN newest reads of one process, their buffers filed by the 1 MiB granules of
    address space they touch: a copy finds the newest read whose buffer it overlaps by looking in
    the granules it touches, not by testing every read (a staged copy, from a pinned buffer no read
    went into, used to test all DIRECT_SCAN of them: half the cost of its verdict). The answer is
    the scan's: the newest overlapping read of the window."""

    __slots__ = ("window", "granules", "wide")

    def __init__(self) -> None:
        self.window: deque[Source] = deque()  # the process's last DIRECT_SCAN reads, oldest first
        self.granules: dict[int, deque[Source]] = {}  # granule -> the window's buffers touching it
        self.wide: deque[Source] = deque()  # the window's buffers over MAX_GRANULES granules

    def add(self, src: Source) -> None:
        buf = src.buf
        if buf is not None:
            size = src.size
            g0, g1 = buf >> GRANULE_SHIFT, (buf + (size if size > 1 else 1) - 1) >> GRANULE_SHIFT
            gs = self.granules
            if g0 == g1:
                lst = gs.get(g0)
                if lst is None:
                    gs[g0] = deque((src,))
                else:
                    lst.append(src)
            elif g1 - g0 >= MAX_GRANULES:
                self.wide.append(src)
            else:
                for g in range(g0, g1 + 1):
                    lst = gs.get(g)
                    if lst is None:
                        gs[g] = deque((src,))
                    else:
                        lst.append(src)
        w = self.window
        w.append(src)
        if len(w) > DIRECT_SCAN:
            self._drop(w.popleft())

    def _drop(self, old: Source) -> None:
        """The window's oldest read leaves: it is the first of every list it is in."""
        buf = old.buf
        if buf is None:
            return
        size = old.size
        g0, g1 = buf >> GRANULE_SHIFT, (buf + (size if size > 1 else 1) - 1) >> GRANULE_SHIFT
        if g0 == g1:
            lst = self.granules[g0]
            lst.popleft()
            if not lst:
                del self.granules[g0]
            return
        if g1 - g0 >= MAX_GRANULES:
            self.wide.popleft()
            return
        gs = self.granules
        for g in range(g0, g1 + 1):
            lst = gs[g]
            lst.popleft()
            if not lst:
                del gs[g]

    def newest_overlap(self, host: int, n: int, first_seq: int) -> tuple[bool, Source | None]:
        """(answered, the newest read from FIRST_SEQ on whose buffer [host, host + n) overlaps);
        answered is False for a copy over more than MAX_GRANULES granules (scan instead)."""
        end = host + (n if n > 1 else 1)
        g0, g1 = host >> GRANULE_SHIFT, (end - 1) >> GRANULE_SHIFT
        if g1 - g0 >= MAX_GRANULES:
            return False, None
        gs = self.granules
        if g0 == g1 and not self.wide:
            lists = [gs[g0]] if g0 in gs else []
        else:
            lists = [gs[g] for g in range(g0, g1 + 1) if g in gs]
            if self.wide:
                lists.append(self.wide)
        best = None
        floor = first_seq - 1  # (only reads newer than the best so far, and than the window's start)
        for lst in lists:
            for cand in reversed(lst):
                if cand.seq <= floor:
                    break
                if cand.buf < end and host < cand.buf + max(cand.size, 1):  # type: ignore[operator]
                    best, floor = cand, cand.seq
                    break
        return True, best

    def overlapping(self, host: int, n: int, first_seq: int) -> list[Source] | None:
        """Every read from FIRST_SEQ on whose buffer's granules [host, host + n) touches, each once,
        in no set order (the caller sorts and tests the bytes); None for a copy over more than
        MAX_GRANULES granules."""
        end = host + (n if n > 1 else 1)
        g0, g1 = host >> GRANULE_SHIFT, (end - 1) >> GRANULE_SHIFT
        if g1 - g0 >= MAX_GRANULES:
            return None
        seen: set[int] = set()
        out: list[Source] = []
        gs = self.granules
        for lst in [*(gs[g] for g in range(g0, g1 + 1) if g in gs), self.wide]:
            for cand in lst:
                if cand.seq >= first_seq and id(cand) not in seen:
                    seen.add(id(cand))
                    out.append(cand)
        return out


@dataclass
class MappedFile:
    """A file mapped by one process: its mappings, what was filled and what copies consumed."""

    pid: int
    job: int
    path: str
    ts: int
    last_ts: int
    maps: list[tuple[int, int, int]] = field(default_factory=list)  # (address, length, file offset)
    size: int = 0  # the largest mapped extent (file offset + length)
    filled: Intervals = field(default_factory=Intervals)  # file offsets the device filled in the trace
    fill_runs: list = field(default_factory=list)  # (ts, offset, size, latency, payload) per fill run
    consumed: Intervals = field(default_factory=Intervals)
    settling: list = field(default_factory=list)  # consumed chunks waiting MAP_SETTLE_NS for their fills
    ok: bool = True

    def __post_init__(self) -> None:
        self.ok = staged_ok(self.path)

    def add_map(self, addr: int, length: int, off: int) -> None:
        if (addr, length, off) not in self.maps:
            self.maps.append((addr, length, off))
        self.size = max(self.size, off + length)

    def direct(self, host: int, n: int) -> tuple[int, int] | None:
        """The file interval a copy of [host, host + n) reads, if it lies in a mapping of this file."""
        for addr, length, off in self.maps:
            if addr <= host < addr + length:
                lo = off + host - addr
                return lo, min(lo + n, off + length)
        return None


@dataclass
class Chunk:
    """Bytes a copy took from a mapped file: a verdict of their own once their fills have settled."""

    mf: MappedFile
    ts: int  # the copy's time
    lo: int
    hi: int
    how: str
    copy: list
    link: str = ""
    rivals: tuple[str, ...] = ()  # as Source.rivals
    checked: bool = False  # the copy's source was seen to hold these bytes (content.py)


class DataFlow:
    """Sources in, copies in; out come finished sources (with what consumed them) and mapped-file
    chunks. ``job_of`` names the traced tree a process belongs to."""

    def __init__(self, job_of) -> None:
        self.job_of = job_of
        self.can_feed = lambda pid: True  # may this process's file bytes be another's staged copy
        # the jobs with a process that opened a CUDA library (None: every job may copy)
        self.cuda_jobs: Callable[[], set[int] | None] = lambda: None
        # the file's own bytes, to check a copy's fingerprint against (None: never checked)
        self.check: ContentCheck | None = None
        self._skip: set[int] = set()  # ids of reads a staged copy was seen not to carry (_staged)
        self.by_pid: dict[int, deque[Source]] = {}  # unconsumed read sources, oldest first
        self.stageable: dict[int, deque[Source]] = {}  # those of them a staged copy may take (staged_ok)
        self.by_job: dict[int, set[int]] = {}  # job -> pids with sources or mappings
        self.mapped: dict[tuple[int, str], MappedFile] = {}
        self.maps_of: dict[int, list[MappedFile]] = {}  # pid -> its mapped files, by first mapping
        self.by_page: dict[tuple[int, int], Source | Taken] = {}  # (pid, buffer >> 12) -> newest read into it
        # a read copies took stays in by_page when it leaves its process's queue, until RETAIN_NS after
        # its first copy (leaving it with the queue, whenever the next advance came, made a buffer
        # copied again after that a staged copy of other bytes); swept when by_page grows
        self._sweep_at = SWEEP_MIN
        self.recent: dict[int, RecentReads] = {}  # pid -> its newest reads by address (made at its first copy)
        self.reads = 0  # reads added (Source.seq)
        self.loose_fills: dict[tuple[int, str], list] = {}  # fills of unmapped files: [ts, lo, hi, lat, payload]
        self.read_cover: dict[tuple[int, str], Intervals] = {}  # file ranges each process read (absorbs readahead)
        self.fill_pids: set[int] = set()  # processes whose page fills the kernel sends (they mapped a data file)
        self.foreign_maps: dict[int, list[tuple[int, int, int]]] = {}  # pid -> (ts, address, length) of
        # mappings of descriptors it never opened (shared memory another process passed it)
        self.done: list[Source] = []
        self.chunks: list[Chunk] = []
        self.expired_fills: list = []  # (MappedFile or None, path, pid, ts, lo, hi, lat, payload)
        self.copying_jobs: set[int] = set()  # jobs that made a CUDA copy (their window is WINDOW_NS)
        # the time of the latest staged copy that chose among several files' waiting bytes, per
        # process whose bytes were among them: a read of it older than that and never copied was
        # passed over (its HOST is by elimination)
        self.chose_at: dict[int, int] = {}
        self._rivals: frozenset[str] = frozenset()  # the files of the staged copy being taken (_staged)
        self.passed_over_jobs: set[int] = set()  # jobs with a read passed over (the split was a guess)
        # Copies to the GPU of a buffer whose read's bytes copies had all taken already, per job, newest
        # last: the same bytes again (to a second GPU), or other bytes the CPU put in the buffer since
        # (a memory pool hands the freed read buffer out again: pyarrow's concatenated columns are
        # copied from where its read buffer was). The trace cannot tell. Such a copy adds nothing at
        # its time; a read of the job that waited through it and that no copy took ends as a staged
        # DRAM_BOUNCE of low confidence, not as host I/O (Source.recopy).
        self.recopies: dict[int, deque[list]] = {}
        # The latest staged copy that took bytes of each (job, file). A decode changes sizes: a CSV's
        # text parsed into floats is copied in fewer bytes than were read, so a staged copy's size is
        # no measure of the file bytes behind it, and the bytes of the file it did not take were host
        # I/O (held-out csv-numpy: 42 % of the file on DRAM_BOUNCE). A read of that file the copy came
        # after, and that no copy took, ends DRAM_BOUNCE, low (Source.with_file).
        self.staged_files: dict[tuple[int, str], list] = {}
        # Copies to the GPU of host memory no traced read explains (a staged copy with bytes left when
        # every waiting file byte it could take was taken), per job, newest last, with those bytes.
        # A process of the job that loaded no CUDA library may have made them: a reader that hands
        # its bytes to the copier through shared memory or a pipe (held-out shm-handoff, pipe-stream,
        # where the reads were host I/O at medium). Its reads are not paired by order (can_feed: a
        # tool the program runs reads files too); the trace cannot tell, so they end UNKNOWN.
        self.unexplained: dict[int, deque[tuple[list, int]]] = {}
        # The latest staged copy whose fingerprint matched none of the waiting file bytes it was
        # compared with, per (job, file) of those it differed from: a decoder's output (a CSV parsed
        # into floats) or other data. A read of that file the copy came after, that no copy took,
        # ends UNKNOWN with that copy (Source.differs), not HOST: only the first RIVAL_SCAN waiting
        # reads are compared, and a CSV read in 4 KiB pieces left the rest HOST.
        self.mismatched: dict[tuple[int, str], list] = {}
        self._staged_sweep_at = SWEEP_MIN  # (swept of copies older than any read that waits, as by_page)

    # -- sources ---------------------------------------------------------------------------------
    def add_read(self, src: Source) -> None:
        """A read-family I/O: it absorbs the loose readahead fills of its range first."""
        self._absorb(src)
        self._file(src.pid, src.job, (src,))

    def add_taken(self, srcs: list[Source]) -> None:
        """Reads of one process, oldest first, each taken whole by one copy and decided elsewhere
        (hostio.HostVerdicts.bounces): what add_read makes of each in turn, in one pass (per read, add_read
        cost as much as the rest of such a verdict). Fills to absorb are looked for only where they
        can be: a process whose page fills come, or with fills of these files waiting."""
        pid = srcs[0].pid
        fills = self.loose_fills
        if pid in self.fill_pids or (fills and any(fills.get((pid, p)) for p in {s.path for s in srcs})):
            for s in srcs:
                self._absorb(s)
        self._file(pid, srcs[0].job, srcs)

    def _absorb(self, src: Source) -> None:
        """The read's range joins its process's read cover (where fills can come), and the loose
        readahead fills in it are its own."""
        if src.offset >= 0 and src.size > 0 and src.pid in self.fill_pids:
            # (only where fills can come: a random reader's millions of ranges are kept nowhere else)
            cover = self.read_cover.setdefault((src.pid, src.path), Intervals())
            if len(cover.starts) < MAX_COVER:
                cover.add(src.offset, src.offset + src.size)
        fills = self.loose_fills.get((src.pid, src.path))
        if fills:
            keep = []
            for f in fills:
                lo, hi = f[1], f[2]
                if hi <= src.offset or lo >= src.offset + src.size:
                    keep.append(f)
                    continue
                for a, b in ((lo, min(hi, src.offset)), (max(lo, src.offset + src.size), hi)):
                    if b - a >= ABSORB_MIN:
                        keep.append([f[0], a, b, f[3], f[4]])
            self.loose_fills[(src.pid, src.path)] = keep

    def _file(self, pid: int, job: int, srcs: Sequence[Source]) -> None:
        """Reads of PID (of JOB), oldest first, into the queues a copy looks in: numbered, waiting
        (at most MAX_WAITING a process), stageable where a staged copy may take them, by page and
        among the recent."""
        seq = self.reads
        for s in srcs:
            seq += 1
            s.seq = seq
        self.reads = seq
        q = self.by_pid.get(pid)
        if q is None:
            q = self.by_pid[pid] = deque()
        q.extend(srcs)
        ok = [s for s in srcs if s.ok]
        if ok:
            st = self.stageable.get(pid)
            if st is None:
                st = self.stageable[pid] = deque()
            st.extend(ok)
        while len(q) > MAX_WAITING:  # (a process reading at 700k/s that copies nothing: bounded memory)
            old = q.popleft()
            if not old.finished:
                old.finished = True
                self.done.append(old)
        pids = self.by_job.get(job)
        if pids is None:
            self.by_job[job] = {pid}
        else:
            pids.add(pid)
        by_page = self.by_page
        for s in srcs:
            if s.buf is not None:
                by_page[(pid, s.buf >> 12)] = s
        recent = self.recent.get(pid)
        if recent is not None:
            # (its window keeps the last DIRECT_SCAN reads: a batch's earlier ones would leave it)
            for s in srcs[-DIRECT_SCAN:]:
                recent.add(s)

    def add_map(self, pid: int, path: str, ts: int, addr: int, length: int, off: int) -> None:
        key = (pid, path)
        mf = self.mapped.get(key)
        if mf is None:
            mf = self.mapped[key] = MappedFile(pid, self.job_of(pid), path, ts, ts)
            self.maps_of.setdefault(pid, []).append(mf)
            self.by_job.setdefault(mf.job, set()).add(pid)
        mf.add_map(addr, length, off)
        mf.last_ts = max(mf.last_ts, ts)

    def inherit(self, parent: int, child: int, ts: int) -> None:
        """A forked child has its parent's mappings (of data files) at the same addresses."""
        for mf in list(self.maps_of.get(parent, ())):
            for addr, length, off in mf.maps:
                self.add_map(child, mf.path, ts, addr, length, off)

    def unmap_all(self, pid: int) -> None:
        """The process exec'd: its mappings are gone (fills no copy took are reported now)."""
        for mf in self.maps_of.pop(pid, []):
            for ts, lo, hi, lat, payload in mf.fill_runs:
                for a, b in mf.consumed.gaps(lo, hi):
                    self.expired_fills.append((mf, mf.path, mf.pid, ts, a, b, lat, payload))
            self.chunks += mf.settling
            self.mapped.pop((pid, mf.path), None)

    def add_foreign_map(self, pid: int, ts: int, addr: int, length: int) -> None:
        self.foreign_maps.setdefault(pid, []).append((ts, addr, length))
        del self.foreign_maps[pid][:-64]

    def note_fills(self, pid: int) -> None:
        """The process's page-cache fills reach the reader (the first of a run, before it is closed)."""
        self.fill_pids.add(pid)

    def add_fill(self, pid: int, path: str, ts: int, lo: int, hi: int, lat: int, payload) -> None:
        """A run of page-cache fills outside read syscalls: a mapping faulting in, or readahead."""
        mf = self.mapped.get((pid, path))
        if mf is not None and mf.ts <= ts:
            hi = min(hi, mf.size) if mf.size > lo else hi  # (the last page reaches past the end of the file)
            mf.filled.add(lo, hi)
            mf.fill_runs.append((ts, lo, hi, lat, payload))
            mf.last_ts = max(mf.last_ts, ts)
            return
        # readahead of a range this process read (the fill run is closed after the read arrived)
        cover = self.read_cover.get((pid, path))
        parts = cover.gaps(lo, hi) if cover else [(lo, hi)]
        for a, b in parts:
            if b - a >= ABSORB_MIN:
                self.loose_fills.setdefault((pid, path), []).append([ts, a, b, lat, payload])

    # -- copies ----------------------------------------------------------------------------------
    def copy(self, ts: int, pid: int, dst: int, src: int, n: int, direction: int, content: int = 0) -> None:
        """A CUDA copy (direction 1 host-to-device, 0 unified: the host side is found by address);
        CONTENT: what the probe read of its host source (content.CopySample, 0: nothing)."""
        if n <= 0 or (direction != 1 and direction != 0):
            return
        c = [ts, pid, dst, src, n, direction, content]
        job = self.job_of(pid)
        self.copying_jobs.add(job)
        if not self._direct(c) and direction == 1 and n >= MIN_STAGED_COPY:
            self._staged(c, n, job)

    def _direct(self, c: list) -> bool:
        """A copy of a read's buffer or of a mapping of the file. A buffer whose read was taken already
        (copied again, to a second GPU say) adds no file bytes, and is no staged copy either."""
        ts, pid, _, host, n = c[:5]
        s = self.by_page.get((pid, host >> 12))
        if s is None or not (s.buf is not None and s.buf <= host < s.buf + max(s.size, 1)) or 0 < s.until < ts:
            s = None
            q = self.by_pid.get(pid)
            if q:
                s = self._newest_read_of(pid, q, host, n)
        if s is not None and s.ts <= ts + 1:
            if not s.finished:  # (a Taken is finished: only a Source comes here)
                if c[6] >> 60 == FLAG_CHANGED and not self._still_the_reads(s, c):  # type: ignore[arg-type]
                    return False  # (other bytes in its buffer now: no copy of this read's)
                take = min(host + n, s.buf + s.size) - max(host, s.buf)  # type: ignore[operator]
                self._consume(s, max(take, 0), "direct", c)  # type: ignore[arg-type]
                if host < s.buf or host + n > s.buf + max(s.size, 1):  # type: ignore[operator]
                    self._direct_rest(s, c)  # type: ignore[arg-type]
            elif c[5] == 1 and n >= MIN_STAGED_COPY:  # (copied again: DataFlow.recopies)
                job = self.job_of(pid)
                again = self.recopies.get(job)
                if again is None:
                    again = self.recopies[job] = deque(maxlen=RECOPIES_KEPT)
                again.append(c)
            return True
        for mf in self.maps_of.get(pid, ()):
            iv = mf.direct(host, n)
            if iv is not None:
                self._take_mapped(mf, iv[0], iv[1], "direct", c)  # (bytes taken already add nothing)
                return True
        return False

    def _direct_rest(self, first: Source, c: list) -> None:
        """The other reads a copy's host range covers beside FIRST's buffer: one copy of a large
        buffer that several reads filled (a streamer's threads each read a 2 MiB chunk into one
        buffer, and a tensor of 8 MiB across four of them is copied at once). Each takes the part of
        its buffer the copy covers that no newer read's buffer took (a buffer reused: its newest
        read's bytes are what the copy carried)."""
        ts, pid, _, host, n = c[:5]
        q = self.by_pid.get(pid)
        if not q:
            return
        cands = self._recent(pid, q).overlapping(host, n, q[0].seq)
        if cands is None:
            return
        end = host + n
        covered = Intervals()
        if first.buf is not None:
            covered.add(max(host, first.buf), min(end, first.buf + max(first.size, 1)))
        for cand in sorted(cands, key=lambda x: -x.seq):
            if cand is first or cand.buf is None or cand.ts > ts + 1:
                continue
            lo, hi = max(host, cand.buf), min(end, cand.buf + max(cand.size, 1))
            if lo >= hi:
                continue
            take = hi - lo - covered.overlap(lo, hi)
            covered.add(lo, hi)
            if take > 0 and not cand.finished:
                self._consume(cand, min(take, cand.remaining()), "direct", c)

    def _still_the_reads(self, s: Source, c: list) -> bool:
        """The probe saw the copy's source differ from what the last read into that address put
        there (FLAG_CHANGED): other bytes were written into the buffer since, unless the file's own
        bytes at that place say the copy carries them after all (a shorter read into the same buffer
        in between changed what the probe kept). Not the read's bytes: S remembers the copy."""
        sample = CopySample.of(c[6])
        if sample is not None and self.check is not None:
            at = c[3] - (s.buf or 0)
            fs = self.check.file_sample(s.path, s.offset + at, s.ts)
            if compare(sample, fs, s.size - at) == Verdict.MATCH:
                return True
        if s.changed is None:
            s.changed = c
        return False

    def _recent(self, pid: int, q: deque[Source]) -> RecentReads:
        """PID's RecentReads, made from its queue Q the first time a copy asks."""
        recent = self.recent.get(pid)
        if recent is None:
            recent = self.recent[pid] = RecentReads()
            for src in reversed(list(itertools.islice(reversed(q), DIRECT_SCAN))):
                recent.add(src)
        return recent

    def _newest_read_of(self, pid: int, q: deque[Source], host: int, n: int) -> Source | None:
        """The newest of the last DIRECT_SCAN reads in Q whose buffer [host, host + n) overlaps
        (reused buffers: the newest read of it), found through RecentReads."""
        recent = self._recent(pid, q)
        # (RecentReads holds the process's last DIRECT_SCAN reads; Q, their suffix from q[0] on)
        answered, s = recent.newest_overlap(host, n, q[0].seq)
        if answered:
            return s
        for k, cand in enumerate(reversed(q)):
            if k >= DIRECT_SCAN:
                break
            if cand.buf is not None and cand.buf < host + n and host < cand.buf + max(cand.size, 1):
                return cand
        return None

    def _staged(self, c: list, n: int, job: int) -> None:
        """The copy's n bytes from the file bytes its fingerprint shows it carries (_by_content);
        where nothing can be checked, from the process's own file bytes first, then the job's
        others', each oldest first (inferred from order). What no file byte explains is host data:
        nothing is taken for it."""
        pid = c[1]
        pids = self.by_job.get(job)
        alone = not pids or (len(pids) == 1 and pid in pids)
        others = [] if alone else [p for p in pids or () if p != pid and self.can_feed(p)]
        sample = CopySample.of(c[6]) if c[6] else None
        if sample is not None and sample.h0 and self.check is not None:
            left = self._by_content(c, n, pid, others, sample)
            if left is not None:
                if left > 0:
                    self._unexplained(job, c, left)
                return
        try:
            self._staged_by_order(c, n, job, pid, alone, others)
        finally:
            if self._skip:
                self._skip = set()

    def _unexplained(self, job: int, c: list, left: int) -> None:
        q = self.unexplained.get(job)
        if q is None:
            q = self.unexplained[job] = deque(maxlen=RECOPIES_KEPT)
        q.append((c, left))

    def _candidates(self, pid: int, others: list[int], ts: int):
        """What a staged copy at TS may carry, in the order of the order-based guess: (process,
        read or None, mapped file or None), the first RIVAL_SCAN waiting reads of each process."""
        for p in (pid, *others):
            k = 0
            for src in itertools.islice(self.stageable.get(p) or (), 4 * RIVAL_SCAN):
                if src.ts > ts or k >= RIVAL_SCAN:
                    break
                if src.finished or src.consumed >= src.size:
                    continue
                k += 1
                yield p, src, None
            for mf in self.maps_of.get(p, ()):  # (a DataLoader's workers map the file the main copies)
                if mf.ok and mf.ts <= ts and mf.consumed.total() < mf.size:
                    yield p, None, mf

    def _by_content(self, c: list, n: int, pid: int, others: list[int], sample: CopySample) -> int | None:
        """Take the copy's bytes from the waiting file bytes its source's fingerprint matches: the
        first waiting read (or mapped file, at the offset order would take) whose file holds the
        copy's first bytes, then that file's next reads in order. Reads whose bytes it was seen not
        to carry remember it (Source.differs). Returns the bytes no file explains, or None: nothing
        could be checked (the order-based guess decides, at low confidence), except that the reads
        seen to differ are skipped by it."""
        assert self.check is not None
        ts, differs, unknown = c[0], [], False
        for _p, s, mf in self._candidates(pid, others, ts):
            if s is not None:
                path, at, rest, since = s.path, s.offset + s.consumed, s.size - s.consumed, s.ts
            elif mf is not None:
                lo = self._mapped_next(mf)
                if lo is None:
                    continue
                path, at, since = mf.path, lo, mf.ts
                rest = next((b - a for a, b in mf.consumed.gaps(lo, mf.size)), 0)
            else:
                continue
            v, where = self._locate(path, at, rest, since, sample)
            if v == Verdict.MATCH:
                return self._take_file(path, where, n, c, pid, others)
            if v == Verdict.DIFFERS and s is not None:
                differs.append(s)
            else:
                unknown = True  # (order within a mapping is a weak guess: a mismatch there says little)
        # (reached only where no candidate matched: a copy that matched another file's bytes says
        # nothing of these, which then end as any read no copy took)
        for s in differs:
            if s.differs is None:
                s.differs = c
            # (the file's other reads this copy passed: ended at expiry as these, Source.differs)
            self.mismatched[(s.job, s.path)] = c
        if not unknown:  # (every candidate checked and none matched: no file byte explains the copy)
            return n if differs else None
        self._skip = {id(s) for s in differs}
        return None

    def _locate(self, path: str, at: int, rest: int, since: int, sample: CopySample) -> tuple[str, int]:
        """Whether the copy's source holds PATH's bytes from AT on (REST of them wait there), or
        from an offset near it (a copy need not start where a read or the model's next byte does):
        (Verdict, the file offset it starts at)."""
        assert self.check is not None
        v = compare(sample, self.check.file_sample(path, at, since), rest)
        if v == Verdict.DIFFERS:
            found = self.check.find(path, at, sample, since)
            if found is not None:
                return Verdict.MATCH, found
        return v, at

    def _mapped_next(self, mf: MappedFile) -> int | None:
        """The offset a staged copy would take next from a mapped file (_staged_mapped's order)."""
        for lo, hi in mf.filled.items():
            for a, _b in mf.consumed.gaps(lo, hi):
                return a
        for a, _b in mf.consumed.gaps(0, mf.size):
            return a
        return None

    def _take_file(self, path: str, at: int, n: int, c: list, pid: int, others: list[int]) -> int:
        """The copy's source was seen to hold PATH's bytes at file offset AT: take PATH's bytes
        [AT, AT + N) from every waiting read and mapping of it in the job (checked by content: high),
        then, where the copy is larger than what waited there (a gather of rows from all over the
        file), PATH's other waiting bytes in order (the file is proven, those offsets are not: low).
        Returns the bytes no file explains."""
        ts, end, left = c[0], at + n, n
        procs = (pid, *others)
        for p in procs:
            how = "staged" if p == pid else "job"  # (the copier's own bytes, or another process's of its job)
            for r in itertools.islice(self.stageable.get(p) or (), MAX_WAITING):
                if left <= 0 or r.ts > ts:
                    break
                if r.finished or r.path != path or r.offset >= end or r.offset + r.size <= at:
                    continue
                take = min(min(end, r.offset + r.size) - max(at, r.offset), r.size - r.consumed, left)
                if take > 0:
                    r.checked = max(at, r.offset)
                    self._consume(r, take, how, c)
                    left -= take
            for mf in self.maps_of.get(p, ()):
                if left <= 0:
                    break
                if mf.path != path or not mf.ok or mf.ts > ts:
                    continue
                lo, hi = max(at, 0), min(end, mf.size)
                got = sum(b - a for a, b in mf.consumed.gaps(lo, hi)) if hi > lo else 0
                if got:
                    self._take_mapped(mf, lo, hi, how, c, checked=True)
                    left -= got
        for p in procs:  # (the rest of the copy: this file's other waiting bytes, by order)
            if left <= 0:
                break
            how = "staged" if p == pid else "job"
            for r in itertools.islice(self.stageable.get(p) or (), MAX_WAITING):
                if left <= 0 or r.ts > ts:
                    break
                if r.finished or r.path != path or r.consumed >= r.size:
                    continue
                take = min(r.size - r.consumed, left)
                self._consume(r, take, how, c)
                left -= take
            for mf in self.maps_of.get(p, ()):
                if left > 0 and mf.path == path and mf.ok and mf.ts <= ts:
                    left -= self._staged_mapped(mf, left, how, c)
        return max(left, 0)

    def _staged_by_order(self, c: list, n: int, job: int, pid: int, alone: bool, others: list[int]) -> None:
        # Oldest first is a guess when bytes of more than one file wait: a program that reads one file
        # only to checksum it and stages another to the GPU would have the first file's bytes taken.
        # The files in reach are noted, and the verdicts say the pairing is inferred between them.
        files = self._waiting_files(pid, c[0], others)
        if len(files) > 1:
            self._rivals = files
            for p in (pid, *others):
                self.chose_at[p] = c[0]
        try:
            left = self._staged_from(pid, c, n, "staged")
            if not alone:  # (the job is more than this process)
                # (sorted whatever is left: _oldest drops the taken reads at the front of each queue)
                for other in sorted(others, key=self._oldest):
                    if left <= 0:
                        break
                    left = self._staged_from(other, c, left, "job")
            if left > 0:
                self._unexplained(job, c, left)
        finally:
            self._rivals = frozenset()

    def _waiting_files(self, pid: int, ts: int, others: list[int]) -> frozenset[str]:
        """The files whose bytes a staged copy at TS could take: the first RIVAL_SCAN waiting reads
        of the copier and of the job's other processes, and the copier's mapped files (at most 4
        named; one means no choice was made)."""
        files: set[str] = set()
        for p in (pid, *others):
            q = self.stageable.get(p)
            k = 0
            for src in itertools.islice(q or (), 4 * RIVAL_SCAN):  # (taken reads wait in it to be dropped)
                if src.ts > ts or k >= RIVAL_SCAN:
                    break
                if src.finished or src.consumed >= src.size:
                    continue
                k += 1
                files.add(src.path)
                if len(files) > 4:
                    return frozenset(files)
            if p == pid:
                for mf in self.maps_of.get(pid, ()):
                    if mf.ok and mf.ts <= ts and mf.consumed.total() < mf.size:
                        files.add(mf.path)
        return frozenset(files)

    def _rivals_of(self, path: str) -> tuple[str, ...]:
        """Up to three of the other files a staged copy chose among (none: no choice was made)."""
        return tuple(sorted(self._rivals - {path})[:3]) if self._rivals else ()

    def _oldest(self, pid: int) -> int:
        """When the process's oldest waiting read came (the order the job's processes are taken in)."""
        q = self.by_pid.get(pid)
        while q and q[0].finished:
            q.popleft()
        return q[0].ts if q else 1 << 62

    def _stageable(self, pid: int) -> deque[Source] | None:
        """The process's reads a staged copy may take, oldest first (taken or expired ones dropped)."""
        q = self.stageable.get(pid)
        while q and q[0].finished:
            q.popleft()
        if q is not None and not q:
            del self.stageable[pid]
            return None
        return q

    def _staged_from(self, pid: int, c: list, left: int, how: str) -> int:
        """Take up to ``left`` bytes of one process's file bytes, reads and mapped files in the order
        they came (maps_of is in the order of each file's first mapping)."""
        ts = c[0]
        mapped = self.maps_of.get(pid)
        maps = [mf for mf in mapped if mf.ok and mf.ts <= ts and mf.consumed.total() < mf.size] if mapped else []
        while left > 0:
            q = self.stageable.get(pid)
            if q is not None:
                while q and q[0].finished:  # (_stageable, written out: once per staged copy)
                    q.popleft()
                if not q:
                    del self.stageable[pid]
                    q = None
            s = q[0] if q and q[0].ts <= ts else None  # (a read after the copy cannot be its source)
            if s is not None and q is not None and self._skip and id(s) in self._skip:
                # (a read the copy's fingerprint was seen not to match: the next one not skipped)
                s = next((x for x in q if not x.finished and id(x) not in self._skip), None)
                if s is not None and s.ts > ts:
                    s = None
            if s is not None and (not maps or how == "job" or s.ts <= maps[0].ts):
                rest = s.size - s.consumed  # (s.remaining())
                take = left if left <= rest else rest if rest > 0 else 0
                exact = how == "staged" and take == s.size == left and s.consumed == 0 and len(q) == 1  # type: ignore[arg-type]
                self._consume(s, take, how, c, exact)
                left -= take
            elif maps:
                got = self._staged_mapped(maps[0], left, how, c)
                if got == 0:
                    maps.pop(0)
                left -= got
            else:
                break
        return left

    def _staged_mapped(self, mf: MappedFile, n: int, how: str, c: list) -> int:
        """Take n bytes of a mapped file for a staged copy: first what the device filled and no copy
        took (the pages just faulted in), then the lowest offsets not taken (pages from the cache)."""
        got = 0
        for lo, hi in mf.filled.items():
            for a, b in mf.consumed.gaps(lo, hi):
                take = min(b - a, n - got)
                self._take_mapped(mf, a, a + take, how, c)
                got += take
                if got >= n:
                    return got
        for a, b in mf.consumed.gaps(0, mf.size):
            take = min(b - a, n - got)
            self._take_mapped(mf, a, a + take, how, c)
            got += take
            if got >= n:
                break
        return got

    def _take_mapped(self, mf: MappedFile, lo: int, hi: int, how: str, c: list, checked: bool = False) -> None:
        for a, b in mf.consumed.gaps(lo, hi):
            mf.consumed.add(a, b)
            rivals = self._rivals_of(mf.path) if how != "direct" and not checked else ()
            link = self._link(c[1]) if how == "job" else ""
            mf.settling.append(Chunk(mf, c[0], a, b, how, c, link, rivals, checked))
        mf.last_ts = max(mf.last_ts, c[0])

    def _consume(self, s: Source, take: int, how: str, c: list, exact: bool = False) -> None:
        s.consumed += take
        s.copies += 1
        if how != "direct":
            self.staged_files[(s.job, s.path)] = c
        if s.copy is None:
            s.copy, s.how, s.exact = c, how, exact
            if how == "job":
                s.link = self._link(c[1])
            if self._rivals and how != "direct":
                s.rivals = self._rivals_of(s.path)
                s.exact = False
        if s.consumed >= s.size and not s.finished:  # (remaining() <= 0)
            s.finished = True  # (left in its queue: dropped when it reaches the front)
            self.done.append(s)

    def _recopy_while(self, s: Source, window: int) -> list | None:
        """The first copy of DataFlow.recopies of S's job made while S waited (after it, within its window)."""
        q = self.recopies.get(s.job)
        if q:
            for c in q:
                if s.ts <= c[0] <= s.ts + window:
                    return c
        return None

    def elsewhere(self, pid: int, job: int, path: str, ts: int, until: int, read: int) -> tuple[list, int] | None:
        """Whether READ bytes of PATH that PID read at TS and no copy took are UNKNOWN rather than
        HOST (Source.elsewhere): a process without CUDA (can_feed) or a text file (text_data), whose
        bytes are never paired with copies by order, and host memory no traced read explains went to
        a GPU from TS to UNTIL (unexplained_since). None: HOST."""
        if staged_ok(path):
            if self.can_feed(pid):
                return None
        elif not text_data(path):
            return None
        return self.unexplained_since(job, ts, until, read)

    def unexplained_since(self, job: int, ts: int, until: int, read: int) -> tuple[list, int] | None:
        """The first copy of DataFlow.unexplained of JOB made from TS to UNTIL, and the bytes no
        read explained of all such copies: where they are at least UNEXPLAINED_SHARE of READ bytes
        (a parse of text makes about as many bytes as it read, or half; the few bytes of a prompt's
        token ids are no sign that a 7 MB tokenizer.json went to the GPU). None: none, or too few."""
        q = self.unexplained.get(job)
        first, total = None, 0
        for c, left in q or ():
            if ts <= c[0] <= until:
                first = first or c
                total += left
        if first is None or total * UNEXPLAINED_SHARE < read:
            return None
        return first, total

    def _link(self, copier: int) -> str:
        """What ties a reader's bytes to another process's copy: a descriptor the copier mapped but
        never opened (shared memory the reader passed it), or nothing seen."""
        seen = self.foreign_maps.get(copier)
        if seen:
            length = seen[-1][2]
            return (
                f"pid {copier} mapped {length} bytes of a descriptor it never opened (shared memory passed "
                f"between the job's processes, as data-loader workers do)"
            )
        return "no link seen between the two processes: by the job's byte accounting"

    # -- time ------------------------------------------------------------------------------------
    def advance(self, now: int, final: bool = False) -> None:
        """Finish what is old enough: unconsumed reads past the window, settled mapping chunks,
        mappings and loose fills idle for the window; reads copies took, RETAIN_NS after."""
        by_page = self.by_page
        if len(by_page) > self._sweep_at or final:
            for page in [k for k, s in by_page.items() if 0 < s.until < now or (final and s.until)]:
                del by_page[page]
            self._sweep_at = max(SWEEP_MIN, 2 * len(by_page))
        staged = self.staged_files
        if len(staged) > self._staged_sweep_at:  # (a data set of a million files: no read that old waits)
            for key in [k for k, c in staged.items() if c[0] + FIRST_COPY_WINDOW_NS < now]:
                del staged[key]
            self._staged_sweep_at = max(SWEEP_MIN, 2 * len(staged))
        if len(self.mismatched) > SWEEP_MIN:
            for key in [k for k, c in self.mismatched.items() if c[0] + FIRST_COPY_WINDOW_NS < now]:
                del self.mismatched[key]
        cuda = self.cuda_jobs()

        def window_of(job: int) -> int:
            if job in self.copying_jobs:
                return WINDOW_NS
            return FIRST_COPY_WINDOW_NS if cuda is None or job in cuda else NO_CUDA_WINDOW_NS

        for pid, q in list(self.by_pid.items()):
            window = window_of(q[0].job) if q else FIRST_COPY_WINDOW_NS
            chose = self.chose_at.get(pid, -1)
            while q and (final or q[0].finished or q[0].ts + window < now):
                s = q.popleft()
                if not s.finished:
                    s.finished = True
                    s.passed_over = s.ok and s.ts <= chose
                    if s.ok and not s.consumed:
                        s.recopy = self._recopy_while(s, window)
                        c = self.staged_files.get((s.job, s.path))
                        # (not where that copy chose among several files' bytes: passed over, by elimination)
                        if c is not None and not s.passed_over and s.ts <= c[0] <= s.ts + window:
                            s.with_file = c
                    if not s.consumed and s.differs is None and s.changed is None:
                        m = self.mismatched.get((s.job, s.path))
                        if m is not None and s.ts <= m[0] <= s.ts + window:
                            s.differs = m
                    if not s.consumed and s.recopy is None and s.with_file is None:
                        s.elsewhere = self.elsewhere(pid, s.job, s.path, s.ts, s.ts + window, s.size)
                    if s.passed_over:
                        self.passed_over_jobs.add(s.job)
                    self.done.append(s)
                if s.buf is not None and self.by_page.get((pid, s.buf >> 12)) is s:
                    if s.copy is not None and s.consumed >= s.size:
                        s.until = s.copy[0] + RETAIN_NS  # (copies took it: it stays a while)
                    else:
                        del self.by_page[(pid, s.buf >> 12)]
            if not q:
                del self.by_pid[pid]
                self.stageable.pop(pid, None)
                self.recent.pop(pid, None)
                self.chose_at.pop(pid, None)
            else:
                # (reads a direct copy took leave this queue only here: a process whose copies are all
                # direct never makes a staged copy that would drop them, and kept every read it made)
                self._stageable(pid)
        for key, mf in list(self.mapped.items()):
            keep = []
            for ch in mf.settling:
                if final or ch.ts + MAP_SETTLE_NS < now:
                    self.chunks.append(ch)
                else:
                    keep.append(ch)
            mf.settling = keep
            # fills no copy took within the window are host I/O; their bytes are spoken for then
            runs = []
            window = window_of(mf.job)
            for run in mf.fill_runs:
                ts, lo, hi, lat, payload = run
                if final or ts + window < now:
                    for a, b in mf.consumed.gaps(lo, hi):
                        self.expired_fills.append((mf, mf.path, mf.pid, ts, a, b, lat, payload))
                        mf.consumed.add(a, b)
                else:
                    runs.append(run)
            mf.fill_runs = runs
            if not final and mf.last_ts + MAP_IDLE_NS < now and not mf.settling and not mf.fill_runs:
                del self.mapped[key]
                self.maps_of[mf.pid].remove(mf)
                if not self.maps_of[mf.pid]:
                    del self.maps_of[mf.pid]
        for key, fills in list(self.loose_fills.items()):
            keep = []
            for f in fills:
                if final or f[0] + WINDOW_NS < now:
                    self.expired_fills.append((None, key[1], key[0], f[0], f[1], f[2], f[3], f[4]))
                else:
                    keep.append(f)
            if keep:
                self.loose_fills[key] = keep
            else:
                del self.loose_fills[key]

    def take_done(self) -> tuple[list[Source], list[Chunk], list]:
        out = (self.done, self.chunks, self.expired_fills)
        if out[0]:
            self.done = []
        if out[1]:
            self.chunks = []
        if out[2]:
            self.expired_fills = []
        return out  # (an empty list handed out is still ours: read it before feeding more)
