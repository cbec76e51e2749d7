"""Whole cuFile calls paired straight from the ring's records (gdsdiag/trace/probes/wholecalls.py) give the
verdicts, file account and counts the event-by-event path gives for the same records.

Both paths run here on the same record bytes through the real record path (bpf.Probes.offline: its
own poll, reorder hold and decoder; no bcc, no rings), the live loop's own step
(session.TraceSession.step) and the real classifier. The records are packed with the ring's own layout
(bpf.REC_STRUCT) from events in the shapes the probes send: a cuFileRead/Write's enter, its exit
with its own thread's pread64/pwrite64 and cufio_px_* hits folded in (record version 4, as
tests/test_trace_fold.py builds them from the GPU machine's compat recordings), libcufile's worker
threads' syscalls and USDT hits sent one record each, handles registered and dropped, host reads,
exits lost and exits whose start was lost. On the GPU machine the same runs under real calls
(tests/test_trace_cufile_live.py, benchmarks/trace_compat_rate.py)."""

from __future__ import annotations

import json
import random

import pytest

from gdsdiag.trace.model import eventdefs
from gdsdiag.trace.model.classify import Classifier
from gdsdiag.trace.model.events import Event
from gdsdiag.trace.model.evidence import ROUTE_USDT
from gdsdiag.trace.probes.bpf import REC_STRIDE, REC_STRUCT, Probes
from gdsdiag.trace.probes.wholecalls import WholeCalls
from gdsdiag.trace.session import TraceSession

KIND = {kind: v for _, v, kind in eventdefs.KINDS}
IDS = {
    "api_enter": eventdefs.names(eventdefs.API),
    "api_exit": eventdefs.names(eventdefs.API),
    "handle": eventdefs.names(eventdefs.API),
    "sys_exit": eventdefs.names(eventdefs.SYSCALLS),
    "proc": eventdefs.names(eventdefs.PROC_EVENTS),
    "fd": eventdefs.names(eventdefs.FD_EVENTS),
}
IDS = {k: {name: v for v, name in t.items()} for k, t in IDS.items()}
SYS = IDS["sys_exit"]
PX = {"read": "cufio_core:cufio_px_read", "write": "cufio_core:cufio_px_write"}
USDT_ID = {name: i for i, name in enumerate(ROUTE_USDT)}
NO_GATE = lambda *cut: ({}, (), None, {})  # noqa: E731  (WholeCalls.split's gate: nothing held elsewhere, no bounce pairs)


def pack(e: Event) -> bytes:
    """One ring record (header, struct event_t, padding) of event E, as the probes write it."""
    if e.kind == "usdt":
        rid = USDT_ID[e.name]
        args = (list(e.args) + [0] * 6)[:6] + [len(e.args)]
    else:
        rid = IDS[e.kind][e.name]
        args = (list(e.args) + [0] * 7)[:7]
    return REC_STRUCT.pack(e.ts, e.pid, e.tid, KIND[e.kind], rid, *args, e.comm.encode()[:16].ljust(16, b"\0"))


def _probes() -> Probes:
    p = Probes.offline()
    p.usdt_names = dict(enumerate(ROUTE_USDT))
    return p


def run(batches, fast: bool, every: int | None = None):
    """The live loop's step (session.TraceSession.step) over BATCHES (poll time, events arriving
    before it): (verdicts as sorted JSON, file summary, counts, I/Os per process, pairs taken)."""
    clf = Classifier()
    pr = _probes()
    out: list = []
    session = TraceSession.over(pr, clf, out.append)
    if fast:
        pr.pair_whole_calls(session.whole_gate)
        if every is not None:
            pr._whole.EVERY_NS = every  # type: ignore[union-attr]

    last = 0
    for now, events in batches:
        blob = []
        for e in events:
            if e.kind == "open" or (e.kind == "proc" and e.name == "exec"):
                pr.give_events([e])  # (the opens ring: decoded by its own callback)
            else:
                blob.append(pack(e))
        if blob:
            pr.give_records(b"".join(blob), len(blob))
        pr.clock = lambda now=now: now
        session.step(0)
        last = now
    pr.clock = lambda: last + 1
    session.step(0, final=True)
    clf.flush()
    out.extend(clf.drain())
    verdicts = sorted(json.dumps(v, sort_keys=True) for v in out)
    files = json.dumps(clf.file_summary(), sort_keys=True, default=sorted)
    ios = {pid: p["ios"] for pid, p in clf.procs.items()}
    return verdicts, files, dict(clf.counts), ios, pr.whole_records


def _setup(pid: int, t: int, fd: int, handle: int, path: str | None) -> list[Event]:
    out = []
    if path is not None:
        out.append(Event(t, pid, pid, "open", "openat", [fd, 0, 0, 0, 0, -100, pid * 10 + fd], "", path))
    out.append(Event(t + 1000, pid, pid, "handle", "cuFileHandleRegister", [handle, fd, 0], f"app{pid}"))
    return out


def _call(pid, tid, t, op, size, off, handle, fd, kind, comm) -> list[Event]:
    """One cuFile call of KIND: whole (its own thread moved every byte), worker (libcufile's worker
    thread did, sent unfolded), failed, short (fewer USDT bytes than it returned), lost_exit,
    lost_enter."""
    api = "cuFileRead" if op == "read" else "cuFileWrite"
    sysname = "pread64" if op == "read" else "pwrite64"
    enter = Event(t, pid, tid, "api_enter", api, [handle, 0x7E0000000000, size, off, 0, 0, 0], comm)
    lat = 20_000
    if kind == "whole":
        ex = [size, 1, fd, SYS[sysname], 1, size, USDT_ID[PX[op]]]
        return [enter, Event(t + lat, pid, tid, "api_exit", api, ex, comm)]
    if kind == "short":
        ex = [size, 1, fd, SYS[sysname], 1, size // 2, USDT_ID[PX[op]]]
        return [enter, Event(t + lat, pid, tid, "api_exit", api, ex, comm)]
    if kind == "failed":
        ex = [-5, 1, fd, SYS[sysname], 0, 0, 0]
        return [enter, Event(t + lat, pid, tid, "api_exit", api, ex, comm)]
    if kind == "worker":
        w = pid * 1000 + 999
        return [
            enter,
            Event(t + 5000, pid, w, "sys_exit", sysname, [fd, 0x7F1000000000, size, off, 0, size, 900], comm),
            Event(t + 5010, pid, w, "usdt", PX[op], [0, off, size], comm),
            Event(t + lat, pid, tid, "api_exit", api, [size, 0, 0, 0, 0, 0, 0], comm),
        ]
    if kind == "lost_exit":
        return [enter]
    if kind == "lost_enter":
        return [Event(t + lat, pid, tid, "api_exit", api, [size, 1, fd, SYS[sysname], 1, size, USDT_ID[PX[op]]], comm)]
    raise AssertionError(kind)


def stream(seed: int, n_calls: int = 400):
    """Batches of a random mix of processes and threads, each thread's calls one after another."""
    rnd = random.Random(seed)
    events: list[Event] = []
    t = 1_000_000_000
    procs = []
    for k, pid in enumerate((300, 301, 302)):
        fd, handle = 7 + k, 0x5B0 + k
        known = not (seed % 5 == 0 and pid == 302)  # (a handle whose file the trace never saw opened)
        events += _setup(pid, t, fd, handle, f"/data/f{pid}.dat" if known else None)
        threads = [pid] + [pid * 10 + j for j in range(rnd.randint(0, 4))]
        procs.append((pid, fd, handle, threads))
    t += 10_000
    # (odd seeds: an anomaly every few calls, even ones: now and then)
    kinds = ["whole"] * (30 if seed % 2 else 300) + ["worker", "short", "failed", "lost_exit", "lost_enter"]
    clock = {}  # tid -> when its next call may start
    for i in range(n_calls):
        pid, fd, handle, threads = rnd.choice(procs)
        tid = rnd.choice(threads)
        start = max(t, clock.get(tid, 0))
        kind = rnd.choice(kinds)
        op = rnd.choice(("read", "read", "write"))
        size = rnd.choice((4096, 4096, 65536, 1 << 20))
        evs = _call(pid, tid, start, op, size, 4096 * i, handle, fd, kind, f"app{pid}")
        events += evs
        clock[tid] = evs[-1].ts + rnd.randint(1, 50_000)
        t += rnd.randint(1_000, 30_000) if seed % 3 else rnd.randint(10_000, 3_000_000)
        r = rnd.random()
        if r < 0.01:  # the handle dropped and registered again (the same file)
            events.append(Event(t, pid, tid, "handle", "cuFileHandleDeregister", [handle], f"app{pid}"))
            events.append(Event(t + 10, pid, tid, "handle", "cuFileHandleRegister", [handle, fd, 0], f"app{pid}"))
        elif r < 0.03:  # the process reads its file on the host too
            events.append(Event(t, pid, tid, "sys_exit", "pread64", [fd, 0x7F2000000000, 8192, 0, 0, 8192, 900], ""))
    return polls(events, rnd, 120)


def polls(events: list[Event], rnd: random.Random, most: int) -> list:
    """EVENTS in the ring's order (records of different CPUs a few µs out of time order, each
    thread's in order), cut into random polls of at most MOST, each with the probes' clock: a random
    time past its last record, never back and never past a record still to come (the ring has every
    record stamped before the poll); now and then a quiet poll after it (held pairs come of age)."""
    events.sort(key=lambda e: e.ts)
    for i in range(len(events) - 1):
        a, b = events[i], events[i + 1]
        if a.tid != b.tid and b.ts - a.ts < 5_000 and rnd.random() < 0.3:
            events[i], events[i + 1] = b, a
    batches, i, now = [], 0, 0
    while i < len(events):
        j = min(len(events), i + rnd.randint(1, most))
        after = events[j].ts if j < len(events) else 1 << 62
        now = max(now, min(after, events[j - 1].ts + rnd.choice((0, 1_000_000, 30_000_000, 60_000_000, 200_000_000))))
        batches.append((now, events[i:j]))
        if rnd.random() < 0.2 and now + 100_000_000 <= after:
            now += 100_000_000
            batches.append((now, []))
        i = j
    return batches


def both_paths_agree(batches, bulk_wanted: bool) -> None:
    """BATCHES through the event path and through bulk pairing (looked at on every poll, and at most
    every 10 ms as the live loop does): the same verdicts, file account, counts and I/Os per process;
    BULK_WANTED: some records were taken in bulk (else the test would not test it)."""
    slow = run(batches, fast=False)
    for every in (0, None):
        fast = run(batches, fast=True, every=every)
        if bulk_wanted and every == 0:
            assert fast[4] > 0, "nothing was taken in bulk: the test would not test it"
        assert fast[0] == slow[0]
        assert fast[1] == slow[1]
        assert fast[2] == slow[2]
        assert fast[3] == slow[3]


@pytest.mark.parametrize("seed", range(40))
def test_pairs_taken_in_bulk_give_the_event_by_event_verdicts(seed):
    # (odd seeds: anomalies every few calls keep most processes on the event path; seeds not a
    # multiple of 3: the stream lasts a few ms, so one or two looks see all of it, and one anomaly
    # in a look sends its process on)
    both_paths_agree(stream(seed), bulk_wanted=seed % 6 == 0)


def test_a_compat_stream_is_paired_almost_whole():
    """Four threads of one process making whole calls: every pair is taken in bulk (none decoded)."""
    rnd = random.Random(7)
    events = _setup(400, 1_000, 7, 0x77, "/data/stream.dat")
    t = 2_000_000
    for i in range(2000):
        tid = 400 + i % 4
        events += _call(400, tid, t + (i % 4) * 3000, "read", 4096, 4096 * i, 0x77, 7, "whole", "compat")
        if i % 4 == 3:
            t += 30_000
    batches = []
    for k in range(0, len(events), 333):
        chunk = events[k : k + 333]
        batches.append((chunk[-1].ts + rnd.choice((0, 60_000_000)), chunk))
    slow, fast = run(batches, False), run(batches, True)
    assert fast[:4] == slow[:4]
    assert len(fast[0]) == 2000
    # every call's two records but the first batch's (the handle's registration is in it: that
    # process's records go the event path's way until it has seen them)
    assert 2 * 2000 - 2 * 333 <= fast[4] < 2 * 2000


def test_final_gives_a_last_enter_to_the_event_path():
    """A thread's call still open at the end is decided by the event path (flush), not dropped."""
    w = WholeCalls(REC_STRIDE)
    enter = pack(Event(10, 5, 5, "api_enter", "cuFileRead", [1, 0, 4096, 0], "x"))
    rest, pairs, _ = w.split(enter, cut=1 << 62, gate=NO_GATE)
    assert pairs == [] and rest == b"" and w.carry == enter  # (waits for its exit)
    rest, pairs, _ = w.split(b"", cut=1 << 62, gate=NO_GATE, final=True)
    assert pairs == [] and rest == enter and w.carry == b""


def test_busy_process_is_left_to_the_event_path():
    w = WholeCalls(REC_STRIDE)
    recs = b"".join(pack(e) for e in _call(6, 6, 10, "read", 4096, 0, 1, 7, "whole", "x"))
    rest, pairs, _ = w.split(recs, cut=1 << 62, gate=lambda cut: ({6: 0}, (), None, {}))
    assert pairs == [] and rest == recs
    rest, pairs, _ = w.split(recs, cut=1 << 62, gate=lambda cut: ({7: 0}, (), None, {}))
    assert rest == b"" and len(pairs) == 1
    (t0, pid, tid, comm, api, handle, size, off, t1, ret, n_sys, fd, sys_id, n_usdt, nbytes, rid) = pairs[0]
    assert (t0, pid, tid, comm, handle, size, off, t1, ret, nbytes) == (10, 6, 6, b"x", 1, 4096, 0, 20_010, 4096, 4096)


def test_a_young_pair_waits_for_the_cut():
    w = WholeCalls(REC_STRIDE)
    recs = b"".join(pack(e) for e in _call(6, 6, 10, "read", 4096, 0, 1, 7, "whole", "x"))
    rest, pairs, _ = w.split(recs, cut=20_009, gate=NO_GATE)
    # (its exit is younger than the cut: it waits unseen, and holds the poll's complete time below
    # it; the enter, old, waits for it in the carry)
    assert pairs == [] and rest == b"" and w.hold_ts() == 20_010 and w.carry == recs[:REC_STRIDE]
    rest, pairs, _ = w.split(b"", cut=20_010, gate=NO_GATE)
    assert len(pairs) == 1 and w.carry == b"" and w.hold_ts() is None


def test_records_are_looked_at_every_10_ms_at_most():
    """Under load the live loop polls every millisecond or so: the records wait, unseen, and the
    poll's complete time stays below them (hold_ts), until 10 ms have passed or a backlog waits."""
    w = WholeCalls(REC_STRIDE)
    one = b"".join(pack(e) for e in _call(6, 6, 10, "read", 4096, 0, 1, 7, "whole", "x"))
    rest, pairs, _ = w.split(one, cut=1 << 40, gate=NO_GATE, now=20_000_000)  # (the first look)
    assert len(pairs) == 1 and rest == b""
    two = b"".join(pack(e) for e in _call(6, 6, 30_000, "read", 4096, 4096, 1, 7, "whole", "x"))
    rest, pairs, _ = w.split(two, cut=1 << 40, gate=NO_GATE, now=25_000_000)  # (5 ms after the last look)
    assert pairs == [] and rest == b"" and w.hold_ts() == 30_000
    rest, pairs, _ = w.split(b"", cut=1 << 40, gate=NO_GATE, now=30_000_000)  # (10 ms after it)
    assert len(pairs) == 1 and w.hold_ts() is None


def test_a_batch_without_calls_passes_untouched():
    """Most batches of most traces hold no cuFile call: they go on as they came, without numpy."""
    w = WholeCalls(REC_STRIDE)
    recs = b"".join(
        pack(Event(10 + i, 6, 6, "sys_exit", "pread64", [7, 0x7F00, 4096, 4096 * i, 0, 4096, 900], "x"))
        for i in range(50)
    )
    assert w.split(recs, cut=1 << 62, gate=NO_GATE) == (recs, [], []) and w._np is None


def test_a_write_held_for_a_call_keeps_the_process_on_the_event_path():
    """A pwrite64 of the file range a long cuFileWrite covers, stamped just before the call's start,
    is held (HOLD_NS) for libcufile's call to claim it; when the hold ends while the call is still
    in flight (here: another thread's call moves the classifier's clock past it), the call takes it,
    and its verdict is no longer its fold's alone. Pairing the calls in bulk would skip that: a
    process with host I/O held is the event path's. (When the hold ends is the classifier's clock,
    which every fed event moves: another process's events, paired or not, and the poll's batching
    shift it too. The rule is for libcufile's own pwrite seen before its call's start, which the
    probes' fold makes rare; docs/trace.md.)"""
    t = 1_000_000_000
    a = _setup(500, t, 7, 0x55, "/data/w.dat")
    write = Event(t + 10_000_000, 500, 5009, "sys_exit", "pwrite64", [7, 0x7F0000000000, 4096, 0, 0, 4096, 900], "")
    call = _call(500, 500, t + 11_000_000, "write", 1 << 20, 0, 0x55, 7, "whole", "app500")
    call[1].ts = t + 160_000_000  # (a slow call: 149 ms)
    other = _call(500, 5001, t + 125_000_000, "read", 4096, 1 << 21, 0x55, 7, "whole", "app500")
    batches = [(t + 70_000_000, a + [write]), (t + 400_000_000, sorted(call + other, key=lambda e: e.ts))]
    slow, fast = run(batches, False), run(batches, True)
    assert fast[:4] == slow[:4]
    assert fast[4] == 0  # (the process had a write held: none of its calls was paired in bulk)
    (mine,) = [json.loads(v) for v in slow[0] if "cuFileWrite" in v]
    assert "pwrite64 fd 7 ×2" in mine["evidence"]  # (the case this test is about: the write was claimed)


def test_the_pairings_numpy_starts_no_blas_threads_and_leaves_the_environment_as_it_was():
    """numpy's BLAS starts a thread per CPU that spins before it sleeps: 2 s of the tracer's CPU on
    the GPU machine's 16 CPUs, for a library the pairing never calls. In a fresh interpreter (numpy not
    loaded yet) the tracer's import must leave one thread and the user's environment untouched."""
    import os
    import subprocess
    import sys

    code = (
        "import os, json\n"
        "os.environ['OMP_NUM_THREADS'] = '3'\n"
        "from gdsdiag.trace.probes.wholecalls import import_numpy\n"
        "np = import_numpy()\n"
        "print(json.dumps([len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'),"
        " os.environ.get('OMP_NUM_THREADS'), np.__name__]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    threads, openblas, omp, name = json.loads(out.stdout)
    assert name == "numpy"
    assert threads == 1, f"numpy's import left {threads} threads"
    assert openblas is None and omp == "3"  # (set only while it loaded; the user's own value kept)


# -- bounce pairs: a read, then the copy of its buffer to the device -------------------------------


def bounce_stream(seed: int, n_pairs: int = 500):
    """Batches of a job (a root and two children) and a process of its own, each reading its data file
    into host buffers and copying them to the device, mostly as bounce pairs (a positioned read, then
    a copy of exactly its buffer and bytes on the same thread), with what the event path must see
    itself mixed in: reads no copy follows, copies from a staging buffer (a child copying bytes its
    sibling read: the job's staged copy), copies of part of a buffer, back to the host, small
    reads, reads of a descriptor never opened, a file mapped, a descriptor closed and opened on
    another file, a write, a buffer copied twice; pauses longer than a pair waits for its copy."""
    rnd = random.Random(seed)
    t = 1_000_000_000
    events: list[Event] = [
        Event(t, 600, 600, "proc", "exec", [], "job"),
        Event(t + 10, 700, 700, "proc", "exec", [], "solo"),
    ]
    for child in (601, 602):
        events.append(Event(t + 20, 600, 600, "proc", "fork", [600, child], "job"))
    procs = []
    for k, pid in enumerate((600, 601, 602, 700)):
        fd = 7 + k
        events.append(
            Event(
                t + 100 + k, pid, pid, "open", "openat", [fd, 0, 0, 0, 0, -100, pid * 10 + fd], "", f"/data/b{pid}.dat"
            )
        )
        threads = [pid] + [pid * 10 + j for j in range(rnd.randint(0, 3))]
        procs.append((pid, fd, threads))
    t += 1_000_000
    odd = ["read_only", "staged", "part", "to_host", "small", "unknown_fd", "mmap", "reopen", "write", "pause", "again"]
    if seed % 4 == 2:  # (none of the two that keep a process on the event path for good)
        odd = [k for k in odd if k not in ("to_host", "mmap")]
    kinds = ["pair"] * (25 if seed % 2 else 400) + odd
    clock: dict[int, int] = {}
    for i in range(n_pairs):
        pid, fd, threads = rnd.choice(procs)
        tid = rnd.choice(threads)
        at = max(t, clock.get(tid, 0))
        kind = rnd.choice(kinds)
        size = rnd.choice((4096, 4096, 65536, 1 << 20))
        buf = 0x7F0000000000 + (tid % 100) * (1 << 21)  # (each thread its own buffer, reused)
        name = rnd.choice(("pread64", "pread64", "preadv2", "preadv"))
        comm = f"p{pid}"
        read = Event(
            at, pid, tid, "sys_exit", name, [fd, buf, size if name == "pread64" else 1, 4096 * i, 0, size, 800], comm
        )
        copy = Event(
            at + rnd.randint(2_000, 40_000), pid, tid, "api_enter", "cuMemcpy", [0x7E0000000000, buf, size, 1], comm
        )
        evs = [read, copy]
        if kind == "read_only":
            evs = [read]
        elif kind == "staged":  # (a copy of a pinned buffer no read went into: the job's bytes, in order)
            evs = [Event(at, pid, tid, "api_enter", "cuMemcpy", [0x7E0000000000, 0x7D0000000000, size, 1], comm)]
        elif kind == "part":
            copy.args[2] = size // 2
        elif kind == "to_host":
            copy.args = [buf, 0x7E0000000000, size, 2]
        elif kind == "small":
            read.args[5] = copy.args[2] = 512
        elif kind == "unknown_fd":
            read.args[0] = 99
        elif kind == "mmap":
            evs = [Event(at, pid, tid, "fd", "mmap", [fd, 0x7C0000000000, 1 << 22, 0], comm), read, copy]
        elif kind == "reopen":
            other = f"/data/other{i}.dat"
            evs = [
                Event(at, pid, tid, "fd", "close", [fd], comm),
                Event(at + 1, pid, tid, "open", "openat", [fd, 0, 0, 0, 0, -100, 90_000 + i], "", other),
                read,
                copy,
            ]
            read.ts, copy.ts = at + 1_000, copy.ts + 1_000
        elif kind == "write":
            evs = [
                read,
                copy,
                Event(copy.ts + 500, pid, tid, "sys_exit", "pwrite64", [fd, buf, size, 0, 0, size, 900], comm),
            ]
        elif kind == "again":  # (the buffer copied to a second GPU, now or in a later look)
            again = rnd.choice((1_000, 15_000_000, 60_000_000))
            evs = [
                read,
                copy,
                Event(copy.ts + again, pid, tid, "api_enter", "cuMemcpy", [0x7E1000000000, buf, size, 1], comm),
            ]
        elif kind == "pause":
            evs = [read, copy]
            copy.ts += 150_000_000  # (longer than a read waits for its copy in the carry)
        events += evs
        clock[tid] = evs[-1].ts + rnd.randint(1, 20_000)
        t += (rnd.randint(10_000, 2_000_000), rnd.randint(20_000, 300_000), rnd.randint(1_000, 20_000))[seed % 3]
    return polls(events, rnd, 150)


@pytest.mark.parametrize("seed", range(60))
def test_bounce_pairs_taken_in_bulk_give_the_event_by_event_verdicts(seed):
    # (seeds that are multiples of 6: few anomalies, pairs spread over seconds)
    both_paths_agree(bounce_stream(seed), bulk_wanted=seed % 6 == 0)


def bounce_job(procs: int, threads: int, pairs: int, seed: int = 3):
    """A launcher and PROCS processes of THREADS threads, each thread reading 4 KiB into its own
    buffer and copying it to the device (benchmarks/trace_compat_rate.py --kind bounce, fio
    --cuda_io=posix, kvikio's POSIX path), each process's first read of a file left waiting for a
    copy (a config at start-up), batched as polls of ~1-3 ms with the clock just past them."""
    rnd = random.Random(seed)
    t = 1_000_000_000
    events = [Event(t, 900, 900, "proc", "exec", [], "launch")]
    kids = [901 + i for i in range(procs)]
    for pid in kids:
        events += [
            Event(t + 10, 900, 900, "proc", "fork", [900, pid], "launch"),
            Event(t + 100, pid, pid, "open", "openat", [5, 0, 0, 0, 0, -100, pid * 10 + 5], "", "/data/cfg.bin"),
            Event(t + 200, pid, pid, "sys_exit", "pread64", [5, 0x7F2000000000, 8192, 0, 0, 8192, 900], "wl"),
            Event(t + 300, pid, pid, "open", "openat", [7, 0, 0, 0, 0, -100, pid * 10 + 7], "", "/data/stream.dat"),
        ]
    t += 1_000_000
    clock = {}
    for i in range(pairs):
        pid = kids[i % procs]
        tid = pid * 10 + (i // procs) % threads
        buf = 0x7F0000000000 + ((i // procs) % threads) * (1 << 21)
        at = max(t, clock.get(tid, 0))
        copy_at = at + rnd.randint(1_000, 9_000)
        events += [
            Event(at, pid, tid, "sys_exit", "pread64", [7, buf, 4096, 4096 * i, 0, 4096, 800], "wl"),
            Event(copy_at, pid, tid, "api_enter", "cuMemcpy", [0x7E0000000000, buf, 4096, 1], "wl"),
        ]
        clock[tid] = copy_at + rnd.randint(500, 5_000)
        t += rnd.randint(20_000, 60_000)  # (~25k pairs/s: 6,000 last 0.24 s, five reorder holds)
    events.sort(key=lambda e: e.ts)
    batches, now, i = [], 0, 0
    while i < len(events):
        end = events[i].ts + rnd.randint(1_000_000, 3_000_000)
        j = i
        while j < len(events) and events[j].ts < end:
            j += 1
        now = max(now, end)
        batches.append((now, events[i:j]))
        i = j
    return batches


@pytest.mark.parametrize("procs, threads", [(1, 1), (1, 4), (4, 4)])
def test_a_bounce_stream_is_taken_almost_whole(procs, threads):
    """Every pair of such a stream is a DRAM_BOUNCE, and all but those of the first looks (before the
    job's first copy is known, and while the processes' leftovers from them are fed) in bulk."""
    n = 6000
    batches = bounce_job(procs, threads, n)
    slow, fast = run(batches, False), run(batches, True)
    assert fast[:4] == slow[:4]
    verdicts = [json.loads(v) for v in fast[0]]
    assert sum(v["route"] == "DRAM_BOUNCE" and v["confidence"] == "high" for v in verdicts) == n
    assert 2 * n * 0.8 <= fast[4] <= 2 * n, fast[4]


def test_four_threads_with_a_read_waiting_are_taken_in_bulk():
    """Four threads of one process, each reading 4 KiB into its own buffer and copying it to the
    device (fio --cuda_io=posix, kvikio's POSIX path), one read left waiting for a copy (a file read
    at start-up): every pair but the first look's is taken in bulk, and each is a DRAM_BOUNCE."""
    rnd = random.Random(3)
    t = 1_000_000_000
    events = [
        Event(t, 800, 800, "proc", "exec", [], "fio"),
        Event(t + 100, 800, 800, "open", "openat", [5, 0, 0, 0, 0, -100, 8005], "", "/data/cfg.bin"),
        Event(t + 200, 800, 800, "sys_exit", "pread64", [5, 0x7F2000000000, 8192, 0, 0, 8192, 900], "fio"),
        Event(t + 300, 800, 800, "open", "openat", [7, 0, 0, 0, 0, -100, 8007], "", "/data/stream.dat"),
    ]
    t += 1_000_000
    for i in range(4000):
        tid = 800 + i % 4
        buf = 0x7F0000000000 + (i % 4) * (1 << 21)
        at = t + (i % 4) * 3_000
        events += [
            Event(at, 800, tid, "sys_exit", "pread64", [7, buf, 4096, 4096 * i, 0, 4096, 800], "fio"),
            Event(at + 1_500, 800, tid, "api_enter", "cuMemcpy", [0x7E0000000000, buf, 4096, 1], "fio"),
        ]
        if i % 4 == 3:
            t += 200_000  # (20k pairs/s: the stream lasts 0.2 s, four times the reorder hold)
    batches, now = [], 0
    for k in range(0, len(events), 333):
        chunk = events[k : k + 333]
        nxt = events[k + 333].ts if k + 333 < len(events) else 1 << 62
        now = max(now, min(nxt, chunk[-1].ts + rnd.choice((0, 60_000_000))))
        batches.append((now, chunk))
    slow, fast = run(batches, False), run(batches, True)
    assert fast[:4] == slow[:4]
    verdicts = [json.loads(v) for v in fast[0]]
    assert sum(v["route"] == "DRAM_BOUNCE" and v["confidence"] == "high" for v in verdicts) == 4000
    assert 2 * 4000 * 0.9 <= fast[4] <= 2 * 4000, fast[4]


@pytest.mark.parametrize("waiting", [0, 3])
def test_a_jobs_first_pairs_are_taken_in_bulk(waiting):
    """A process whose first CUDA copies come in the same look as their reads (a short program, or
    a tracer seconds behind: 16k records a look), with WAITING reads of another file before them
    that no copy takes (Python's start reads OpenSSL's config): every pair is taken in bulk, its job's
    first copy included, and the verdicts are the event path's. (The GPU machine's recorded 50k-pair
    stream went the event path for its first 16k records: tests/fixtures/gpu-machine/
    stream-profile-2026-12-06/rec-bounce.jsonl.gz.)"""
    t = 1_000_000_000
    events = [
        Event(t, 950, 950, "proc", "exec", [], "py"),
        Event(t + 100, 950, 950, "open", "openat", [3, 0, 0, 0, 0, -100, 9503], "", "/etc/ssl/openssl.cnf"),
    ]
    events += [
        Event(t + 200 + k, 950, 950, "sys_exit", "read", [3, 0x7F2000000000, 4096, 0, 0, 4096, 900], "py")
        for k in range(waiting)
    ]
    events.append(Event(t + 300, 950, 950, "open", "openat", [7, 0, 0, 0, 0, -100, 9507], "", "/data/stream.dat"))
    n = 3000
    for i in range(n):
        at = t + 250_000_000 + i * 5_000
        buf = 0x7F0000000000 + (i % 8) * 4096
        events += [
            Event(at, 950, 951, "sys_exit", "preadv2", [7, buf, 1, 4096 * i, 0, 4096, 800], "py"),
            Event(at + 2_000, 950, 951, "api_enter", "cuMemcpy", [0x7E0000000000, buf, 4096, 1], "py"),
        ]
    # (the start in a look of its own, as Python's start takes many; then the pairs in one look: the
    # job had made no copy before it)
    k = 2 + waiting  # (the open of the stream)
    batches = [(events[k].ts + 200_000_000, events[: k + 1]), (events[-1].ts + 260_000_000, events[k + 1 :])]
    slow, fast = run(batches, False), run(batches, True)
    assert fast[:4] == slow[:4]
    assert fast[4] == 2 * n, fast[4]
    verdicts = [json.loads(v) for v in fast[0]]
    assert sum(v["route"] == "DRAM_BOUNCE" and v["confidence"] == "high" for v in verdicts) == n
    assert sum(v["route"] == "HOST" for v in verdicts) == waiting


@pytest.mark.parametrize("polls", [8, 1])
def test_a_young_event_of_a_process_does_not_keep_its_older_pairs_from_bulk(polls):
    """The trace seconds behind a process (a backlog in the ring: the poll decodes 16k records at a
    time), which opens a file at its end (a program writing its result): the open, from its own ring,
    waits in the reorder hold while the records before it are looked at. It comes after all of them,
    so it keeps none of them from being paired (on the GPU machine it kept two thirds of a 100k-call
    bounce stream on the event path, 2026-12-06), also in the last look, at the end (POLLS 1: most of
    the stream is looked at there)."""
    n = 12000
    (events,) = [evs for _, evs in [(0, [e for _, b in bounce_job(1, 1, n) for e in b])]]
    last = events[-1].ts
    events.append(
        Event(last + 1_000, 901, 901, "open", "openat", [9, 0o1101, 0, 0, 0, -100, 9999], "", "/data/result.json")
    )
    # (and its records after its last pair, in the same look: they are the event path's, not its pairs)
    events.append(Event(last + 1_200, 901, 901, "sys_exit", "write", [9, 0x7F3000000000, 90, 0, 0, 90, 500], "wl"))
    events.append(Event(last + 1_300, 901, 901, "fd", "close", [9], "wl"))
    # (the start followed live, the clock 40 ms past it; then the rest in the ring at once, the clock
    # just past it: each poll, 10 ms apart, decodes 16k records of it)
    start = events[:2000]
    batches = [(start[-1].ts + 40_000_000, start)]
    batches += [(last + 2_000 + k * 10_000_000, events[2000:] if k == 0 else []) for k in range(polls)]
    slow, fast = run(batches, False), run(batches, True)
    assert fast[:4] == slow[:4]
    assert fast[4] >= 2 * n * 0.8, fast[4]


def test_bounce_pairs_a_stop_leaves_unfed_are_counted_as_their_reads_and_copies():
    """A stop's budget can end before a process's bounce pairs (one "bounces" event) are fed: the
    summary's unclassified counts must stand for every read and copy in it, as for decoded events."""
    from gdsdiag.trace.result import tally_events as _tally_events

    clf = Classifier()
    clf.procs[901] = {"pid": 901, "ppid": None, "comm": "wl", "exe": None, "ios": 0}
    clf.fds[(901, 7)] = type("D", (), {"path": "/data/x.dat"})()
    pairs = [
        (1_000 + i, 901, 901, b"wl", IDS["sys_exit"]["pread64"], 7, 0x7F00, 4096, 4096 * i, 0, 4096, 800)
        + (2_000 + i, 0x7E00, 0x7F00, 4096, 1, 0, 0, 0, 1_000, i == 2)
        for i in range(3)
    ]
    (e,) = clf._feed_bounces(pairs)
    assert e.kind == "bounces" and len(e.args) == 3
    into: dict = {}
    _tally_events([e], into)
    # (events, I/Os, bytes, reads, bytes read)
    assert list(into[901]) == [6, 3, 3 * 4096, 3, 3 * 4096]


def test_a_copy_after_a_processs_pairs_still_counts_for_its_job():
    """Two processes of one job. P makes bounce pairs, then closes a descriptor (from there on its
    records are the event path's) and copies a pinned buffer no read went into; Q reads between P's
    close and that copy, and copies its buffer after it. On the event path P's staged copy takes Q's
    waiting bytes (the job's); Q's pairs may only be taken in bulk if the classifier hears of P's
    copy, though P itself was taken."""
    t = 1_000_000_000
    ev = [Event(t, 600, 600, "proc", "exec", [], "job")]
    for pid, fd in ((601, 7), (602, 8)):
        ev += [
            Event(t + 10, 600, 600, "proc", "fork", [600, pid], "job"),
            Event(t + 50, pid, pid, "open", "openat", [20, 0, 0, 0, 0, -100, 0], "", "/usr/lib/libcuda.so.1"),
            Event(t + 100, pid, pid, "open", "openat", [fd, 0, 0, 0, 0, -100, pid * 10 + fd], "", f"/data/{pid}.dat"),
        ]
    buf = {601: 0x7F1000000000, 602: 0x7F2000000000}
    fds = {601: 7, 602: 8}

    def pair(pid, at, i):
        return [
            Event(at, pid, pid, "sys_exit", "pread64", [fds[pid], buf[pid], 4096, 4096 * i, 0, 4096, 800], "w"),
            Event(at + 2_000, pid, pid, "api_enter", "cuMemcpy", [0x7E0000000000, buf[pid], 4096, 1], "w"),
        ]

    for i in range(50):  # (the job's first copies, and pairs of both, 1 ms apart)
        ev += pair(601, t + 1_000_000 * (i + 1), i) + pair(602, t + 1_000_000 * (i + 1) + 500_000, i)
    s = t + 200_000_000
    ev += pair(601, s, 100) + [
        Event(s + 10_000, 601, 601, "fd", "close", [9], "w"),
        Event(s + 30_000, 601, 601, "api_enter", "cuMemcpy", [0x7E0000000000, 0x7D0000000000, 4096, 1], "w"),
    ]
    ev += [
        Event(s + 20_000, 602, 602, "sys_exit", "pread64", [8, buf[602], 4096, 4096 * 100, 0, 4096, 800], "w"),
        Event(s + 40_000, 602, 602, "api_enter", "cuMemcpy", [0x7E0000000000, buf[602], 4096, 1], "w"),
    ]
    ev.sort(key=lambda e: e.ts)
    first = [e for e in ev if e.ts < s]
    batches = [(s - 1, first), (s + 100_000_000, [e for e in ev if e.ts >= s])]
    slow, fast = run(batches, False), run(batches, True)
    assert fast[:4] == slow[:4]
    (q,) = [json.loads(v) for v in slow[0] if '"ts": %d' % (s + 20_000) in v]
    assert "another process of the same traced tree" in " ".join(q["evidence"])  # (the case this is about)


def test_pairs_into_buffers_above_48_bits_are_each_found_again_by_their_buffer():
    """A process (pid 604: bit 2 set, where a key packing the pid above 36 bits of page number
    would meet bit 50 of an address) alternates two buffers 2^50 apart (LA57 user addresses), and
    later copies the older one again while another file's bytes wait: that copy must find its own
    read (taken, kept RETAIN_NS), as on the event path, not take the waiting bytes as a staged copy."""
    t, pid = 1_000_000_000, 604
    lo, hi = 0x7F1000000000, 0x7F1000000000 | (1 << 50)
    ev = [
        Event(t, pid, pid, "proc", "exec", [], "w"),
        Event(t + 50, pid, pid, "open", "openat", [20, 0, 0, 0, 0, -100, 0], "", "/usr/lib/libcuda.so.1"),
        Event(t + 100, pid, pid, "open", "openat", [7, 0, 0, 0, 0, -100, 77], "", "/data/a.dat"),
        Event(t + 200, pid, pid, "open", "openat", [8, 0, 0, 0, 0, -100, 88], "", "/data/c.dat"),
    ]

    def pairs(at: int, first: int) -> list[Event]:  # (B then A, 1 ms apart: A's read is the newer)
        out = []
        for i in range(first, first + 50):
            buf = (hi, lo)[i % 2]
            out += [
                Event(at, pid, pid, "sys_exit", "pread64", [7, buf, 4096, 4096 * i, 0, 4096, 800], "w"),
                Event(at + 2_000, pid, pid, "api_enter", "cuMemcpy", [0x7E0000000000, buf, 4096, 1], "w"),
            ]
            at += 1_000_000
        return out

    ms = 1_000_000
    s = t + 700 * ms  # (B's last copy ~100 ms before: its read is still kept, RETAIN_NS)
    tail = [
        Event(s + 10 * ms, pid, pid, "sys_exit", "pread64", [8, 0x7F3000000000, 4096, 0, 0, 4096, 800], "w"),
        Event(s + 20 * ms, pid, pid, "api_enter", "cuMemcpy", [0x7E0000100000, hi, 4096, 1], "w"),
    ]
    # (the job's first copies on the event path; pairs looked at in bulk; then the other file's read)
    batches = [(t + 400 * ms, ev + pairs(t + ms, 0)), (s, pairs(t + 500 * ms, 50)), (s + 400 * ms, tail)]
    slow, fast = run(batches, False), run(batches, True)
    assert fast[4] > 0, "nothing was taken in bulk: the test would not test it"
    assert fast[:4] == slow[:4]
    (c,) = [json.loads(v) for v in slow[0] if '"/data/c.dat"' in v]
    # (the copy found B's read, taken: a copy again, which C waited through; not a staged copy of C)
    assert (c["route"], c["confidence"]) == ("DRAM_BOUNCE", "low")
