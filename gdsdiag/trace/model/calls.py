"""cuFile-call matching: each cuFile call (cuFileRead/Write, their async forms, batch requests)
held from its start until its evidence is in — the probes that fired for it on its own thread or
on libcufile's workers, matched by process, time window, direction and file offset — then decided
by evidence.ROUTE_RULES. Reads the process state (procstate.py: handles, descriptors); its verdicts
go back to the dispatcher (classify.Classifier), which emits them. Pure: no I/O."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .events import API_NAMES, NVFS_IOCTLS, SYS_NAMES, Event
from .evidence import KPROBE_EVIDENCE, ROUTE_USDT, SYSCALL_EVIDENCE, decide_once, usdt_kind
from .procstate import ProcState
from .records import ASYNC_TIMEOUT_NS, FINALIZE_NS, POSITIONED, HostIo, io_line
from .tally import Unclassified, count_unclassified

if TYPE_CHECKING:
    from ...schema import trace as schema


@dataclass(slots=True, eq=False)  # (eq=False: a call is itself, found by identity in the lists it is in)
class Pending:
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


class Calls:
    """cuFile calls not yet decided, per process: in flight (a sync call until its exit, an async or
    batch request until its bytes are in) and ended (sync calls in exit order, kept FINALIZE_NS for
    evidence from other CPUs). Evidence is matched against the few calls that can still take it, not
    every call held: at 25k calls/s the old single list made each match O(held) (66 verdicts/s)."""

    def __init__(self) -> None:
        self.inflight: dict[int, list[Pending]] = {}
        self.ended: dict[int, deque[Pending]] = {}
        # calls whose exit was lost (CallMatcher._retire_stale), oldest first: no evidence is matched
        # to them; decided or retired only at the end
        self.orphans: dict[int, list[Pending]] = {}
        self.n = 0

    def __bool__(self) -> bool:
        return self.n > 0

    def add(self, p: Pending) -> None:
        lst = self.inflight.get(p.pid)
        if lst is None:
            self.inflight[p.pid] = [p]
        else:
            lst.append(p)
        self.n += 1

    def _leave_flight(self, p: Pending) -> bool:
        """P out of the calls in flight (and its process's list with it, when that empties): whether
        it was there."""
        lst = self.inflight.get(p.pid)
        if lst is None or p not in lst:
            return False
        lst.remove(p)
        if not lst:
            del self.inflight[p.pid]
        return True

    def forget(self, p: Pending) -> None:
        """P leaves in flight undecided (Classifier.exits_counted: another count has it)."""
        if self._leave_flight(p):
            self.n -= 1

    def orphan(self, p: Pending) -> None:
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

    def end(self, p: Pending) -> None:
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

    def finish(self, now: int, final: bool) -> list[Pending]:
        out = []
        for pid, q in list(self.ended.items()):
            while q and (final or now > q[0].t_end + FINALIZE_NS):  # type: ignore[operator]
                out.append(q.popleft())
            if not q:
                del self.ended[pid]
        for pid, lst in list(self.inflight.items()):
            keep: list[Pending] = []
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
    sent as its own record (match_call) or folded into the call's exit (_folded): one label for both."""
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


class CallMatcher:
    """The cuFile calls not yet decided (``pending``), each thread's calls open (``api_stack``), and
    the evidence matched to them."""

    def __init__(self, state: ProcState, counts: dict[str, int], comms: dict[bytes, str], emit):
        self.state = state
        self.emit = emit  # (the dispatcher's: where a call decided at its exit goes out, Classifier._emit)
        self.counts = counts  # (the classifier's: events, api_calls, unmatched_exits, small_io)
        self.comms = comms  # feed_whole: a record's comm bytes -> its text (shared with the bounce intake)
        self.pending = Calls()
        self.api_stack: dict[tuple[int, int], list[Pending]] = {}
        self.fold_shapes: dict[tuple, tuple] = {}  # whole_verdict's labels and decision per fold shape
        # cuFileRead/Write exits that are I/Os (exit_is_io) of calls whose start was not seen: counted,
        # no route (the summary's unclassified_by_process)
        self.unmatched: Unclassified = {}

    def on_api_enter(self, e: Event) -> None:
        """A cuFile call starts (cuMemcpy is the host-I/O side's: Classifier._on_api_enter)."""
        name = e.name
        key = (e.pid, e.tid)
        stack = self.api_stack.get(key)
        if stack is None:
            stack = self.api_stack[key] = []
        if name not in _CUFILE_IO:
            calls = self.state.cufile_calls.get(e.pid)
            if calls is None:
                calls = self.state.cufile_calls[e.pid] = {}
            calls.setdefault(name, None)
            stack.append(Pending(e.pid, e.tid, e.comm, name, "", 0, 0, 0, e.ts))
            return
        self.state.cufile_io_pids.add(e.pid)
        self.counts["api_calls"] += 1
        a = e.args
        if len(a) < 4:
            a = a + [0] * 6
        h = self.state.handles.get((e.pid, a[0]))
        # (positional: once per cuFile call, and keywords cost a dataclass __init__ more)
        p = Pending(
            e.pid, e.tid, e.comm, name, _op_of(name), a[0], a[3], a[2], e.ts, None, None, {}, 0, 0, set(),
            name in _CUFILE_ASYNC, h[1] if h is not None else None,
        )  # fmt: skip
        self.pending.add(p)
        stack.append(p)

    def on_api_exit(self, e: Event) -> None:
        """A call ends: decided now and emitted when its own thread's fold moved all its bytes
        (whole_verdict), else held for evidence from other CPUs (FINALIZE_NS)."""
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
            self.state.cufile_calls.setdefault(e.pid, {})["cuFileDriverOpen"] = e.args[0] & 0xFFFFFFFF
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
                self.emit(self.whole_verdict(p, e))
            else:
                if folded:
                    self._folded(p, e)
                self.pending.end(p)
            if stack:  # (a call under it: usually none)
                self._retire_stale(stack)
        elif p.is_async:
            p.ret = e.args[0] if e.args else None  # the enqueue status; I/O follows on the stream

    def _retire_stale(self, stack: list[Pending]) -> None:
        """A thread's cuFileRead/Write calls come one after another (the probes keep one call a
        thread: cufile_trace.c in_api), so a call of it still open under the one that just ended
        lost its exit (the kernel's full ring or the reader's backlog dropped it). It is set aside
        now (Calls.orphan), not left in flight until the trace's end: there it took later evidence
        of its thread as its own, and every call's end searched the list past it (20k dropped exits
        made each end 20k steps). At the end it is what it was: exits_counted retires it, or flush
        decides it, as before."""
        while stack and stack[-1].t_end is None and stack[-1].api in _CUFILE_SYNC_IO:
            self.pending.orphan(stack.pop())

    def _folded(self, p: Pending, e: Event) -> None:
        """The evidence the call's own thread gave, sent with its exit (record version 4, probes/
        cufile_trace.c api_fold_t): args [ret, syscalls, their fd, their id, USDT hits, their bytes,
        the probe's ROUTE_USDT index]. Added as match_call and on_usdt add the same evidence
        sent one record each: the same labels, counts and kinds, so the verdict is the same."""
        _, n_sys, fd, sys_id, n_usdt, nbytes, rid = e.args[:7]
        api = SYS_NAMES.get(sys_id) if n_sys else None
        if api in SYSCALL_EVIDENCE:
            label, kind = _syscall_hit(api, fd)
            p.add(label, kind, e.ts, 0, n_sys)
            if p.path is None:
                d = self.state.fds.get((e.pid, fd))
                if d is not None:
                    p.path = d.path  # the handle's registration was not seen: the file it read names it
        if n_usdt:
            name = ROUTE_USDT[rid] if 0 <= rid < len(ROUTE_USDT) else f"usdt#{rid}"
            kind, _, _, label = _usdt_hit(name)
            p.add(label, kind, e.ts, nbytes, n_usdt)

    def fold_shape(self, api: str, args) -> tuple:
        """(evidence labels, route, subtype, confidence, whether the fold names the file) of a call
        whose evidence is its exit's fold ARGS alone: _folded then verdict's labels and decision,
        kept per fold shape (syscalls, fd, syscall, USDT hits, probe)."""
        q = Pending(0, 0, "", api, _op_of(api), 0, 0, 0, 0)
        q.path = ""  # (the file is the call's own, looked up by the caller)
        self._folded(q, Event(0, 0, 0, "api_exit", api, list(args)))
        ev = [k if n == 1 else f"{k} ×{n}" for k, n in q.evidence.items()]
        route, sub, conf, notes = decide_once(q.kinds)
        names_file = args[1] > 0 and SYS_NAMES.get(args[3]) in SYSCALL_EVIDENCE
        shape = (ev + list(notes), route, sub, conf, names_file)
        if len(self.fold_shapes) < 4096:  # (a few descriptors of a few processes)
            self.fold_shapes[(api, args[1], args[2], args[3], args[4], args[6])] = shape
        return shape

    def whole_verdict(self, p: Pending, e: Event) -> schema.IoLine:
        """_folded then verdict of a call whose evidence is its exit's fold alone, the fold's labels,
        kinds and decision worked out once per fold shape (syscalls, fd, syscall, USDT hits, probe):
        a COMPAT stream repeats one shape (tests/test_trace_fold.py holds it to the two steps)."""
        a = e.args
        shape = self.fold_shapes.get((p.api, a[1], a[2], a[3], a[4], a[6]))
        if shape is None:
            shape = self.fold_shape(p.api, a)
        ev, route, sub, conf, names_file = shape
        path = p.path
        if path is None and names_file:
            d = self.state.fds.get((e.pid, a[2]))
            if d is not None:
                path = d.path  # the handle's registration was not seen: the file it read names it
        if not path:
            path = self.state.handles.get((p.pid, p.handle), (None, None))[1]
        self.state.proc(p.pid, p.comm)["ios"] += 1
        # (e.ts: the exit's own time, the call's t_end)
        return io_line(
            p.t_start, p.pid, p.tid, p.comm, p.api, p.op or "?", path, p.offset, p.size, p.ret,
            e.ts - p.t_start, route, sub, conf, ev.copy(),
        )  # fmt: skip

    def on_batch_req(self, e: Event) -> None:
        a = e.args + [0] * 7
        self.counts["api_calls"] += 1
        self.pending.add(
            Pending(
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
                path=self.state.handles.get((e.pid, a[0]), (None, None))[1],
            )
        )

    def _ok(self, p: Pending, e: Event, op: str | None, off: int | None, slack: int) -> bool:
        if p.t_end is not None and e.ts > p.t_end + slack:
            return False
        if op is not None and p.op and p.op != op:
            return False
        return off is None or p.covers(off)

    def candidates(self, e: Event, op: str | None, off: int | None, every: bool = False) -> list[Pending]:
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

    def on_usdt(self, e: Event) -> None:
        """A libcufile USDT probe fired: evidence for the call it fired in."""
        a = e.args
        hit = _USDT.get(e.name)
        if hit is None:
            hit = _usdt_hit(e.name)
        kind, matched, op, label = hit
        if matched:
            # the probe fires per syscall of the call (libcufile splits large requests): matched to
            # the call covering its file offset; only the POSIX probes carry offset and size
            px = kind == "px"
            off = a[1] if px and len(a) > 1 else None
            nbytes = a[2] if px and len(a) > 2 else 0
            cands = self.candidates(e, op, off)
            if cands:
                cands[0].add(label, kind, e.ts, nbytes)
            return
        for p in self.candidates(e, None, None)[:1]:
            p.add(label, kind, e.ts)

    def on_kprobe(self, e: Event) -> None:
        """A kernel return probe (nvidia-fs, PCI P2PDMA): evidence by its return value."""
        name, a = e.name, e.args
        ret = a[0] if a else 0
        rule = KPROBE_EVIDENCE.get(name)
        kind = rule(ret) if rule is not None else ""
        if kind:
            for p in self.candidates(e, None, None)[:1]:
                p.add(f"kprobe {name}={ret}", kind, e.ts)

    def on_syscall(self, e: Event) -> None:
        """An nvidia-fs ioctl, or an io_submit / io_uring_enter: evidence for the calls in flight."""
        name, a = e.name, e.args
        if name == "ioctl":
            cmd = a[4] if len(a) > 4 else 0
            label = NVFS_IOCTLS.get(cmd, hex(cmd))
            op = "read" if label == "NVFS_IOCTL_READ" else "write" if label == "NVFS_IOCTL_WRITE" else None
            if op:
                for p in self.candidates(e, op, None)[:1]:
                    p.add(f"ioctl {label}", SYSCALL_EVIDENCE["ioctl"], e.ts)
            return
        if name in ("io_submit", "io_uring_enter"):
            # one submission carries many requests (libcufile's compat batch path uses io_submit)
            for p in self.candidates(e, None, None, every=True):
                if p.api == "cuFileBatchIO" or p.is_async:
                    p.add(f"{name}", SYSCALL_EVIDENCE[name], e.ts)

    def match_syscall(self, io: HostIo) -> bool:
        """Is this pread/pwrite (or AIO request) libcufile's own, inside a cuFile call on its file?"""
        return self.match_call(io.e, io.api, io.op, io.offset, io.path)

    def match_call(self, e: Event, api: str, op: str | None, off: int, path: str | None) -> bool:
        """_match_syscall of an I/O not held (yet): the usual case of libcufile's own pread, which
        then needs no HostIo."""
        if not self.pending or (api not in POSITIONED and api != "aio"):
            return False
        cands = self.candidates(e, op, off)
        if not cands:
            return False
        p = cands[0]
        label, kind = _syscall_hit(api, e.args[0])
        p.add(label, kind, e.ts, 0)
        if p.path is None and path is not None:
            p.path = path  # the handle's registration was not seen: the file it read names it
        return True

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

    def verdict(self, p: Pending) -> schema.IoLine:
        path = p.path or self.state.handles.get((p.pid, p.handle), (None, None))[1]
        ev = []
        for k, n in p.evidence.items():  # (a loop: a comprehension is a function call before 3.12)
            ev.append(k if n == 1 else f"{k} ×{n}")
        route, sub, conf, notes = decide_once(p.kinds)  # evidence.ROUTE_RULES: the one table
        if notes:
            ev += notes
        lat = (p.t_end - p.t_start) if p.t_end is not None else None
        self.state.proc(p.pid, p.comm)["ios"] += 1
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

    def feed_whole(self, pairs, out: list, account) -> tuple[list[Event], int]:
        """Whole sync cuFile calls paired from the ring's records (wholecalls.WholeCalls.split):
        each decided as on_api_enter, on_api_exit and whole_verdict decide it, through the same
        fold-shape table: its line into OUT, its bytes into ACCOUNT (accounts.Batched). A call whose
        handle's file is not known here comes back as its two events, for the caller to feed in time
        order with the rest (its thread may have an exit there still to come first). Returns those
        and the newest exit's time (0: none)."""
        handles, shapes, procs, comms = self.state.handles, self.fold_shapes, self.state.procs, self.comms
        left: list[Event] = []
        now = 0
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
                shape = self.fold_shape(api, (ret, n_sys, fd, sys_id, n_usdt, nbytes, rid))
            if t1 > now:
                now = t1
            p = procs.get(pid)
            if p is None:
                p = self.state.proc(pid, comm)
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
        return left, now

    def busy(self, pid: int) -> bool:
        """A call of PID undecided: in flight, ended but held, or orphaned (it could claim a read)."""
        pending = self.pending
        return bool(pending.inflight.get(pid) or pending.ended.get(pid) or pending.orphans.get(pid))

    def open_stacks(self) -> dict[int, tuple[int, int]]:
        """tid -> (pid, calls open on its stack) for the threads with one."""
        return {tid: (pid, len(stack)) for (pid, tid), stack in self.api_stack.items() if stack}

    def waiting(self, add) -> None:
        """ADD(pid, size) of every call that moves file data and waits for its evidence."""
        pending = self.pending
        for calls in (*pending.inflight.values(), *pending.ended.values(), *pending.orphans.values()):
            for p in calls:
                if p.op is not None:
                    add(p.pid, p.size)
