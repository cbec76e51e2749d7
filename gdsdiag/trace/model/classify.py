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

The classifier is this dispatcher and four collaborators, each fed or asked by it alone, in one
direction: ``ProcState`` (procstate.py: processes, descriptors, handles, io_uring tables, renames),
``CallMatcher`` (calls.py: cuFile calls and the evidence matched to them), ``HostVerdicts`` (hostio.py:
the verdicts of host I/O against the CUDA copies and the data-flow model) and ``Accounts``
(accounts.py: the per-file and per-tree books). Every route and confidence comes from one of the two
rule tables in evidence.py (ROUTE_RULES, HOST_RULES).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Container, Mapping
from operator import itemgetter
from typing import TYPE_CHECKING

from .accounts import Accounts
from .calls import CallMatcher, Pending, exit_is_io
from .content import ContentCheck, recorded_answers
from .dataflow import DataFlow, Source
from .events import SYS_NAMES, Event
from .evidence import HOST_RULE
from .hostio import HostVerdicts
from .procstate import ProcState
from .records import (
    ADVANCE_NS,
    HOLD_NS,
    IN_KERNEL,
    MIN_APP_IO,
    PAGE_RUN_GAP_NS,
    POSITIONED,
    READ_SYS,
    WRITE_SYS,
    Batched,
    HostIo,
    io_line,
)
from .tally import Unclassified, count_unclassified

if TYPE_CHECKING:
    from ...check.facts import NodeFacts
    from ...schema import trace as schema
    from .why import NodeMissing

__all__ = ["Classifier", "classify", "exit_is_io", "io_line", "MIN_APP_IO", "POSITIONED", "RENAME_WORK_MAX"]

_RW_OP = {**dict.fromkeys(READ_SYS, "read"), **dict.fromkeys(WRITE_SYS, "write")}
# descriptors, handles, inodes and accounts a trace's renames may walk in all (a recording is a
# stranger's: a million renames over a million descriptors must not take hours); beyond it a rename
# moves the per-file account of that exact path only
RENAME_WORK_MAX = 5_000_000
_BOUNCE = HOST_RULE["direct"]  # (a bounce pair: a read, then a copy of exactly its buffer)
_BY_TS = itemgetter("ts")  # (a verdict line's time: the order verdicts come out in)


class Classifier:
    """Feed events in (roughly) time order with ``feed``; collect the verdicts from ``drain`` and at
    the end from ``flush``: each the ``trace --json`` io line itself (``schema.trace.IoLine``), so the
    field list is written once and the JSON output is the verdict as it is. Keeps per-process state only for I/O still open."""

    def __init__(self, path_filter: str | None = None, record_version: int = 2):
        self.state = state = ProcState(path_filter, record_version)
        self.counts = {"events": 0, "api_calls": 0, "unmatched_exits": 0, "small_io": 0}
        self._comms: dict[bytes, str] = {}  # feed_whole, _feed_bounces: a record's comm bytes -> its text
        self.flow = DataFlow(state.job_of)  # file bytes in host memory and the copies that take them
        self.calls = calls = CallMatcher(state, self.counts, self._comms, self._emit)
        self.host = HostVerdicts(state, self.flow)
        self.books = Accounts(state, self.flow)
        # (the collaborators' own tables, under the names the live trace, the tests and the
        # benchmarks read them by)
        self.path_filter, self.v1 = state.path_filter, state.v1
        self.procs, self.fds, self.handles, self.inodes = state.procs, state.fds, state.handles, state.inodes
        self.said, self.libcufile_pids, self.cuda_procs = state.said, state.libcufile_pids, state.cuda_procs
        self.pending, self.api_stack, self.unmatched = self.calls.pending, self.calls.api_stack, self.calls.unmatched
        self.memcpy, self.files, self.block = self.host.memcpy, self.books.files, self.books.block
        self.held: deque = deque()  # host I/O waiting for libcufile's call or a CUDA copy (time order)
        self.page_runs: dict[
            tuple[int, int, int], list
        ] = {}  # (pid, dev, ino) -> [first ts, last ts, first index, next index, event]
        self.out: list[schema.IoLine] = []
        self.now = 0
        self.notes: list[str] = []
        self.use_content(ContentCheck())  # (a replay without recorded answers: nothing is checked)
        self._rename_work = 0  # (RENAME_WORK_MAX)
        self.flow.can_feed = state.cuda_procs.__contains__
        self.flow.cuda_jobs = lambda: {state.job_of(p) for p in state.cuda_procs}
        self._advanced = 0  # event time of the last _advance (replay finalises as the live loop does)
        # flush(deadline): a stop's budget, and the I/Os it left undecided per process
        self._deadline: float | None = None
        self._late = False
        self._since_clock = 0
        self.unclassified: Unclassified = {}
        # (bound once: the hot path's calls)
        self.job_of, self._proc, self._is_data_path = state.job_of, state.proc, state.is_data_path
        self._data_paths = state.data_paths
        self._call_enter, self._match_call = calls.on_api_enter, calls.match_call
        self._add_verdict = self.books.add_verdict
        self._handlers = {
            "sys_exit": self._on_syscall,
            "open": state.on_open,
            "fd": self._on_fd,
            "proc": self._on_proc,
            "pages": self._on_pages,
            "majflt": self._on_major_fault,
            "handle": state.on_handle,
            "api_enter": self._on_api_enter,
            "api_exit": calls.on_api_exit,
            "bounces": self._on_bounces,
            "batch_req": self.calls.on_batch_req,
            "rename": self._on_rename,
            "said": state.on_said,
            "blk_issue": self.books.on_block,
            "usdt": self.calls.on_usdt,
            "kprobe": self.calls.on_kprobe,
        }

    # -- what the collaborators hold, under the classifier's names ----------------------------------
    @property
    def cgroup_job(self) -> bool:
        """--cgroup: the whole cgroup is one job."""
        return self.state.cgroup_job

    @cgroup_job.setter
    def cgroup_job(self, value: bool) -> None:
        self.state.cgroup_job = value

    @property
    def node(self) -> NodeFacts | None:
        """The node's GDS facts (check/facts.py), for each file's why."""
        return self.books.node

    @node.setter
    def node(self, value: NodeFacts | None) -> None:
        self.books.node = value

    @property
    def node_missing(self) -> NodeMissing:
        """Why ``node`` is None (a live trace sets its own reason)."""
        return self.books.node_missing

    @node_missing.setter
    def node_missing(self, value: NodeMissing) -> None:
        self.books.node_missing = value

    @property
    def major_faults(self) -> dict[str, int] | None:
        """Major page faults per mapped data file; None where that event was not attached."""
        return self.books.major_faults

    @major_faults.setter
    def major_faults(self, value: dict[str, int] | None) -> None:
        self.books.major_faults = value

    def program_said(self, pids) -> list[tuple[str, str]]:
        return self.state.program_said(pids)

    def _path_ok(self, path: str | None) -> bool:
        return self.state.path_ok(path)

    def _opens(self, path: str, was: list[str] | None) -> tuple[int, int]:
        return self.books._opens(path, was)

    def _account(self, *args, **kwargs) -> dict:
        return self.books.account(*args, **kwargs)

    def _folded(self, p: Pending, e: Event) -> None:
        self.calls._folded(p, e)

    def _verdict(self, p: Pending) -> schema.IoLine:
        return self.calls.verdict(p)

    def block_summary(self, name_of=None) -> list[dict]:
        return self.books.block_summary(name_of)

    def add_counted(self, rows: list[dict]) -> None:
        self.books.add_counted(rows)

    def file_summary(self) -> list[dict]:
        return self.books.file_summary()

    def tree_summary(self) -> list[dict]:
        return self.books.tree_summary()

    def needs_node_facts(self, gpu_program: bool = False) -> bool:
        return self.books.needs_node_facts(gpu_program)

    def copied_elsewhere(
        self, pid: int, first_ts: int, path: str, nbytes: int, writers: Container[int] = ()
    ) -> str | None:
        return self.host.copied_elsewhere(pid, first_ts, path, nbytes, writers)

    def exits_counted(self, threads: Mapping[tuple[int, int], int]) -> None:
        self.calls.exits_counted(threads)

    def use_content(self, check: ContentCheck) -> None:
        """Where staged copies' fingerprints are checked against the files' bytes (content.py):
        the files themselves while tracing, a recording's answers in a replay."""
        self.content = check
        self.flow.check = check
        self.host.content = check

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

    # -- processes, descriptors, renames (procstate.py), and what the data-flow model keeps of them ----
    def _on_proc(self, e: Event) -> None:
        a = e.args
        state = self.state
        if e.name == "fork" and len(a) > 2 and a[2] == 1:
            state.thread_forked(a[0])
        elif e.name == "fork" and len(a) > 1:
            state.forked(a[0], a[1], e.comm)
            self.flow.inherit(a[0], a[1], e.ts)  # (after the parent link: the child is in its job)
        elif e.name == "exec":
            for key, run in [(k, r) for k, r in self.page_runs.items() if k[0] == e.pid]:
                self._close_page_run(key, run)  # while the old image's mappings are still known
            state.execed(e.pid, e.comm, e.path)
            self.flow.unmap_all(e.pid)  # a new program: the old image's mappings are gone
        elif e.name == "adopt":
            state.adopted(e.pid, e.comm, a[0] if a else None, e.path)
        elif e.name == "exit":
            state.proc(a[0] if a else e.pid)["exited"] = True
        elif e.name == "thread_exit" and len(a) > 1:
            state.thread_ended(a[0], a[1])

    def _on_fd(self, e: Event) -> None:
        a = e.args + [0] * 4
        if e.name != "mmap":
            self.state.on_fd(e, a)
            return
        d = self.fds.get((e.pid, a[0]))
        if d is not None:
            if self.state.is_data(d.path):
                self.flow.add_map(e.pid, d.path, e.ts, a[1], a[2], a[3])
        elif a[1] > 0 and a[2] > 0:
            self.flow.add_foreign_map(e.pid, e.ts, a[1], a[2])

    def _on_rename(self, e: Event) -> None:
        """rename/renameat/renameat2, or linkat of a descriptor (procstate.ProcState.rename_names).
        From now on the file is NEW: the descriptors open on it, its account (file_summary), the
        registered io_uring files, the counted I/O (counted.py reads the resolved event), and the
        verdicts still to come of its I/O before the rename (_emit)."""
        names = self.state.rename_names(e)
        e.path = None  # (what counted.CountedIo reads: set below to the rename as applied, if it is one)
        if names is None:
            return
        old, new = names
        e.path = old + "\0" + new
        if self.state.is_exchange(e):
            # (the two names swap: through a name no path has, at the same time, in order)
            swap = old + "\0exchange"
            self._rename(old, swap, e.ts)
            self._rename(new, old, e.ts)
            self._rename(swap, new, e.ts)
        else:
            self._rename(old, new, e.ts)

    def _rename(self, old: str, new: str, ts: int) -> None:
        """OLD (a file, or a directory: every path under it) is NEW from TS on."""
        self.state.note_rename(old, new, ts)
        work = self.state.rename_work() + len(self.files)
        if self._rename_work + work > RENAME_WORK_MAX:
            self.books.renamed(old, new, everything=False)
            return
        self._rename_work += work
        self.state.rename_paths(old, new)
        self.books.renamed(old, new, everything=True)

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
        books = self.books
        if books.major_faults is None:
            books.major_faults = {}  # (a recording that has them: its trace counted them)
        addr = e.args[0] if e.args else 0
        for mf in self.flow.maps_of.get(e.pid, ()):
            for start, length, _ in mf.maps:
                if start <= addr < start + length:
                    path = mf.path
                    books.major_faults[path] = books.major_faults.get(path, 0) + 1
                    return

    def _close_page_run(self, key, run) -> None:
        self.page_runs.pop(key, None)
        pid, dev, ino = key
        path = self.inodes.get((dev, ino))
        if path is None:
            return  # a library or a file opened before the trace: not named, not data
        e = run[4]
        off, size = run[2] * 4096, (run[3] - run[2]) * 4096
        if not self.state.is_data(path):
            return
        # a mapped file's pages faulting in, or readahead of a file read next (the data-flow model
        # tells the two apart by whether this process maps the file)
        self.flow.add_fill(pid, path, run[0], off, off + size, run[1] - run[0], e)

    # -- host I/O: the syscalls ------------------------------------------------------------------------
    def _on_syscall(self, e: Event) -> None:
        name = e.name
        a = e.args  # (read only: the event's own list, as the probes record its 7 arguments)
        if len(a) < 7:
            a = a + [0] * 7
        if name == "ioctl" or name in ("io_submit", "io_uring_enter"):
            self.calls.on_syscall(e)
            return
        ret = a[5] if a[5] < 1 << 63 else a[5] - (1 << 64)
        op: str | None = _RW_OP.get(name)
        if op is None:
            for io in self.state.other_ios(e, a, ret):
                self._host_io(e, *io)
            return
        # (read/write and their forms, most of a stream: resolved here, not through other_ios)
        d = self.fds.get((e.pid, a[0]))
        if d is None:
            d = self.state.desc(e, a[0])
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

    def _host_io(self, e, api, op, path, off, size, ret, buf, lat, note) -> None:
        if self.pending and self._match_call(e, api, op, off, path):
            return
        if path is not None and not self._data_paths.get(path, None) and not self._is_data_path(path):
            return
        if 0 <= size < MIN_APP_IO:  # small reads/writes (headers, configs) are not a data path
            self.counts["small_io"] += 1
            return
        io = HostIo(e, api, op, path, off, size, ret, buf, lat, note)
        if op == "write":
            self.state.wrote_data.add(e.pid)  # (a process without CUDA that writes files: copied_elsewhere)
        if op == "read" and path is not None and api not in IN_KERNEL:
            # file bytes in host memory: the data-flow model's, until a copy takes them or the window passes
            pid = e.pid
            self.flow.add_read(Source(pid, self.job_of(pid), e.ts, path, off, size, buf, io))
        else:
            self.held.append(io)  # a write (its copy came before it) or an in-kernel copy

    # -- cuFile calls (calls.py) and CUDA copies (hostio.py) -------------------------------------------
    def _on_api_enter(self, e: Event) -> None:
        if e.name != "cuMemcpy":
            self._call_enter(e)
            return
        self.host.note_copy(e)
        a = e.args
        if len(a) < 4:
            a = a + [0, 0, 0, 0]
        flow = self.flow
        # dst, src, bytes, direction, what the probe read of the host source (recordings of
        # version 4 and before: nothing)
        flow.copy(e.ts, e.pid, a[0], a[1], a[2], a[3], a[6] if len(a) > 6 else 0)
        if flow.done or flow.chunks or flow.expired_fills:
            self._take_flow()

    def whole_gate(self):
        """What wholecalls.py must leave to the event path: (processes with host I/O held here, which
        a call of theirs still in flight could claim at the hold's end; tid -> (pid, calls open on
        its stack) for the threads with one, whose next exit is the event path's; bounce_ok)."""
        held = {io.e.pid for io in self.held}
        return held, self.calls.open_stacks(), self.bounce_ok

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
        procs, calls, by_page = self.procs, self.calls, self.flow.by_page
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
        busy |= self.host.copied_back
        busy |= refused
        ok = set()
        for p in pids:
            if p not in procs or p in busy or calls.busy(p):
                continue
            job = self.job_of(p)
            if not (jobs.get(job, set()) - {p}):  # (its own earlier copies are fed first)
                ok.add(p)
        return ok

    def feed_whole(self, pairs, bounces=()) -> list[Event]:
        """Whole sync cuFile calls paired from the ring's records (wholecalls.WholeCalls.split):
        each decided as _on_api_enter, the call matcher's on_api_exit and whole_verdict decide it
        (calls.CallMatcher.feed_whole), and put in the file account once per file, route and process
        of the batch (what _emit adds one verdict at a time). A call whose handle's file is not known
        here comes back as its two events, for the caller to feed in time order with the rest (its
        thread may have an exit there still to come first); so do BOUNCES this classifier would not
        take as pairs (_feed_bounces)."""
        account = Batched()  # (path, route, api, pid) -> [verdicts, bytes, end]
        left, now = self.calls.feed_whole(pairs, self.out, account)
        taken = len(pairs) - len(left) // 2
        counts = self.counts
        counts["events"] += 2 * taken
        counts["api_calls"] += taken
        if now > self.now:
            self.now = now
        books = self.books
        for (path, route, api, pid), (ios, nbytes, end, first, last, tids) in account.items():
            books.account(path, ios, nbytes, route, api, pid, end, first, last, tids)
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
        """One process's bounce pairs (_feed_bounces), decided by hostio.HostVerdicts.bounces, put in
        the file account once per file of the batch."""
        account, last = self.host.bounces(e, self.out)
        if last > self.now:
            self.now = last
        self.counts["events"] += 2 * len(e.args) - 1  # (feed counted this one)
        books, pid = self.books, e.pid
        for (path, route, api), (ios, nbytes, end, first, t_end, tids) in account.items():
            f = books.account(path, ios, nbytes, route, api, pid, end, first, t_end, tids)
            f["how"].add("direct")

    # -- finalisation ----------------------------------------------------------------------------
    def _advance(self, final: bool = False) -> None:
        now = self.now
        self._advanced = now
        for p in self.pending.finish(now, final):
            if self._deadline is not None and self._out_of_time():
                self._unclassified(p.pid, p.op, p.ret)
                continue
            self._emit(self.calls.verdict(p))
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
            if not self.calls.match_syscall(io) and io.path is not None:
                self._emit(self.host.host_verdict(io, now))
        self.flow.advance(now, final)
        self._take_flow()

    def _take_flow(self) -> None:
        flow = self.flow
        if not (flow.done or flow.chunks or flow.expired_fills):
            return
        done, chunks, fills = flow.take_done()
        host = self.host
        for src in done:
            io = src.payload
            if isinstance(io, HostIo):
                if self._deadline is not None and self._out_of_time():
                    self._unclassified(io.e.pid, io.op, io.ret)
                    continue
                if self.pending and self.calls.match_syscall(io):
                    continue  # libcufile's own pread after all (its call was seen late)
            self._emit(*host.source_verdict(src))
        for ch in chunks:
            self._emit(*host.chunk_verdict(ch))
        for mf, path, pid, ts, lo, hi, lat, e in fills:
            self._emit(*host.fill_verdict(mf, path, pid, ts, lo, hi, lat, e))

    def _emit(self, v: schema.IoLine, cached: int = 0, filled: int = 0, how: str = "", inferred: bool = False) -> None:
        """Every verdict goes out here, and into the per-file account (file_summary)."""
        path = was = v["path"]
        if self.state.renames and path:
            final = self.state.final_name(path, v["ts"])
            if final != path:
                verb = "written" if v["op"] == "write" else "read"
                v["path"] = path = final
                v["evidence"] = [*v["evidence"], f"{verb} as {was}, renamed to {final}"]
        self.out.append(v)
        if path:
            self._add_verdict(v, was, cached, filled, how, inferred)  # type: ignore[arg-type]

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
        self.calls.waiting(add)
        return out


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
