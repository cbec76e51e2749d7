"""A cuFile call's own evidence folded into its exit record (record version 4).

The probes add a cuFileRead/Write's pread64/pwrite64 and cufio_px_* USDT hits on the calling thread to
the call's exit record (probes/cufile_trace.c api_fold_t) instead of sending each as a record. The
classifier must give the same verdict for the folded stream as for the stream of the same I/O sent
one record each (what the probes sent up to record version 3, and still send for libcufile's worker
threads). Both streams here are what the probes send for the same calls: the unfolded ones in the
shape of the GPU machine's compat recordings (tests/fixtures/trace/, libcufile 1.15: pread64 on the
calling thread, then cufio_px_read with offset and size), the folded ones as api_rw_exit writes them.
The kernel side runs on the GPU machine (tests/test_trace_cufile_live.py)."""

from __future__ import annotations

import glob
import gzip
import json
import os
import subprocess
import sys
from collections import Counter

from gdsdiag.trace.model.classify import classify
from gdsdiag.trace.model.eventdefs import SYSCALLS
from gdsdiag.trace.model.events import RECORD_VERSION, Event
from gdsdiag.trace.model.evidence import ROUTE_USDT, USDT_FOLDED
from gdsdiag.trace.recording import read_record

SYS_ID = {name: value for _, value, name in SYSCALLS}
PX = {"read": "cufio_core:cufio_px_read", "write": "cufio_core:cufio_px_write"}
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "trace")


def _calls(specs, fold: bool) -> list[Event]:
    """Events of cuFile calls. SPECS: (op, offset, size, own_syscalls, worker_syscalls, ret) per call;
    own ones are the calling thread's (folded when FOLD), worker ones on thread 200 (never folded)."""
    out = [
        Event(0, 100, 100, "open", "openat", [7, 0, 0, 0, 0, -100, 1], "app", "/data/f.dat"),
        Event(1, 100, 100, "handle", "cuFileHandleRegister", [0x5B, 7, 0], "app"),
    ]
    t = 1_000_000
    for op, off, size, own, workers, ret in specs:
        api = "cuFileRead" if op == "read" else "cuFileWrite"
        sysname = "pread64" if op == "read" else "pwrite64"
        out.append(Event(t, 100, 100, "api_enter", api, [0x5B, 0x7E0000000000, size, off, 0], "app"))
        chunk = size // max(own + workers, 1)
        folded_sys = folded_usdt = folded_bytes = 0
        for k in range(own + workers):
            tid = 100 if k < own else 200
            at, t = t + 100, t + 200
            o = off + k * chunk
            if fold and tid == 100:
                folded_sys += 1
                folded_usdt += 1
                folded_bytes += chunk
                continue
            out.append(Event(at, 100, tid, "sys_exit", sysname, [7, 0x7F1000000000, chunk, o, 0, chunk, 900], "app"))
            out.append(Event(at + 10, 100, tid, "usdt", PX[op], [0, o, chunk], "app"))
        t += 300
        exit_args = [ret, 0, 0, 0, 0, 0, 0]
        if fold and folded_sys:
            exit_args = [ret, folded_sys, 7, SYS_ID[sysname], folded_usdt, folded_bytes, ROUTE_USDT.index(PX[op])]
        out.append(Event(t, 100, 100, "api_exit", api, exit_args, "app"))
        t += 5_000
    return out


CASES = [
    ("read", 0, 4096, 1, 0, 4096),  # the usual compat read: all on the calling thread
    ("write", 8192, 1 << 20, 1, 0, 1 << 20),
    ("read", 1 << 20, 16 << 20, 0, 2, 16 << 20),  # split into chunks on libcufile's workers
    ("read", 32 << 20, 16 << 20, 1, 1, 16 << 20),  # one chunk of each
    ("read", 64 << 20, 4096, 3, 0, -5),  # retried, and failed (-EIO)
    ("write", 0, 0, 0, 0, 0),  # nothing moved: no evidence at all
]


def test_folded_and_unfolded_streams_give_the_same_verdicts():
    one = classify(_calls(CASES, fold=False))
    two = classify(_calls(CASES, fold=True))
    assert len(one) == len(two) == len(CASES)
    for a, b in zip(one, two):
        assert {**a, "evidence": sorted(a["evidence"])} == {**b, "evidence": sorted(b["evidence"])}
    # where only the calling thread gave evidence, the evidence list itself (its order too) is the same
    for k in (0, 1, 4):
        assert one[k]["evidence"] == two[k]["evidence"]
    assert [v["route"] for v in two][:5] == ["COMPAT"] * 5
    assert "pread64 fd 7 ×3" in two[4]["evidence"] and "usdt cufio_core:cufio_px_read ×3" in two[4]["evidence"]


def test_folded_evidence_names_the_file_when_the_handle_registration_was_not_seen():
    evs = [e for e in _calls(CASES[:1], fold=True) if e.kind != "handle"]
    (v,) = classify(evs)
    assert v["path"] == "/data/f.dat" and v["route"] == "COMPAT"


def test_the_folded_probes_are_the_matched_posix_ones_and_keep_their_index():
    # a version-4 recording names the folded probe by its index in ROUTE_USDT: the order is part of
    # the format (px_read 0, px_write 1)
    assert ROUTE_USDT.index("cufio_core:cufio_px_read") == 0
    assert ROUTE_USDT.index("cufio_core:cufio_px_write") == 1
    assert set(USDT_FOLDED) == {"cufio_core:cufio_px_read", "cufio_core:cufio_px_write"}


def test_recordings_of_earlier_versions_replay_as_before():
    # the GPU machine's recordings (versions 2 and 3: every syscall its own record) still give COMPAT
    # with the pread64 and USDT evidence
    seen = 0
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.jsonl.gz"))):
        header, events = read_record(path)
        assert header["gdsdiag_trace_record"] < 4
        for v in classify(events, record_version=int(header["gdsdiag_trace_record"])):
            if v["route"] == "COMPAT" and v["api"] == "cuFileRead":
                seen += 1
                assert any(x.startswith("pread64 fd ") for x in v["evidence"]), v
    assert seen > 0


def test_a_recording_from_a_newer_gdsdiag_is_refused_with_one_line(tmp_path):
    rec = tmp_path / "newer.jsonl.gz"
    with gzip.open(rec, "wt") as f:
        f.write(json.dumps({"gdsdiag_trace_record": RECORD_VERSION + 1}) + "\n")
        f.write(json.dumps([1, 100, 100, "api_exit", "cuFileRead", [4096, 9, 9, 9, 9, 9, 9], "app", None]) + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 3, r
    assert r.stderr.count("\n") == 1 and "recorded by a newer gdsdiag" in r.stderr, r.stderr
    assert f"record version {RECORD_VERSION + 1}" in r.stderr


def test_a_stop_counts_an_unclassified_cufile_call_as_one_io_with_its_bytes():
    # since the call's own pread64/pwrite64 ride in its exit record, a stop that cannot classify the
    # call counts the exit as the I/O (bpf.tally_records on undecoded records, live._tally_events on
    # decoded ones): one read or write each, the bytes its result says, a failed call none
    from gdsdiag.trace.probes.bpf import REC_STRUCT, tally_records
    from gdsdiag.trace.result import tally_events as _tally_events

    comm = b"app".ljust(16, b"\0")
    api_exit, api_enter, sys_exit = 2, 1, 5
    recs = [
        REC_STRUCT.pack(1, 7, 7, api_enter, 1, 0x5B, 0, 4096, 0, 0, 0, 0, comm),
        REC_STRUCT.pack(2, 7, 7, api_exit, 1, 4096, 1, 37, 1, 1, 4096, 0, comm),  # cuFileRead, folded
        REC_STRUCT.pack(3, 7, 8, api_exit, 2, 65536, 1, 37, 2, 1, 65536, 1, comm),  # cuFileWrite
        REC_STRUCT.pack(4, 7, 7, api_exit, 1, -5, 1, 37, 1, 0, 0, 0, comm),  # failed: -EIO
        REC_STRUCT.pack(5, 9, 9, sys_exit, 1, 3, 0, 4096, 0, 0, 4096, 900, comm),  # another process's pread64
        REC_STRUCT.pack(6, 7, 7, api_exit, 12, 0, 0, 0, 0, 0, 0, 0, comm),  # not a cuFile I/O
    ]
    got: dict = {}
    tally_records(b"".join(recs), got)
    # [events, I/Os, bytes, reads, read bytes]
    assert got == {7: [5, 3, 4096 + 65536, 2, 4096], 9: [1, 1, 4096, 1, 4096]}
    uniform: dict = {}
    tally_records(recs[1] * 4, uniform)
    assert uniform == {7: [4, 4, 4 * 4096, 4, 4 * 4096]}
    evs = [
        Event(2, 7, 7, "api_exit", "cuFileRead", [4096, 1, 37, 1, 1, 4096, 0], "app"),
        Event(3, 7, 8, "api_exit", "cuFileWrite", [65536, 1, 37, 2, 1, 65536, 1], "app"),
        Event(4, 7, 7, "api_exit", "cuFileRead", [-5, 1, 37, 1, 0, 0, 0], "app"),  # (decoded signed: s64 a[])
        Event(5, 7, 7, "api_enter", "cuFileRead", [0x5B, 0, 4096, 0, 0], "app"),
    ]
    decoded: dict = {}
    _tally_events(evs, decoded)
    assert decoded == {7: [4, 3, 4096 + 65536, 2, 4096]}


def test_an_exit_with_nothing_folded_is_an_event_not_an_io():
    # libcufile's worker threads moved the bytes (their pread64s went out as their own records and
    # count as themselves): the exit alone is no I/O, in each of the stop's three tallies
    from gdsdiag.trace.probes.bpf import REC_STRUCT, tally_records
    from gdsdiag.trace.result import tally_events as _tally_events

    comm = b"app".ljust(16, b"\0")
    bare = REC_STRUCT.pack(2, 7, 7, 2, 1, 1 << 20, 0, 0, 0, 0, 0, 0, comm)  # cuFileRead exit, 1 MiB, none folded
    folded = REC_STRUCT.pack(3, 7, 7, 2, 1, 4096, 1, 37, 1, 1, 4096, 0, comm)
    got: dict = {}
    exits: Counter = Counter()
    tally_records(bare * 3, got, exits)  # (the uniform path)
    assert got == {7: [3, 0, 0, 0, 0]} and exits == {}
    mixed: dict = {}
    tally_records(bare + folded, mixed, exits)
    assert mixed == {7: [2, 1, 4096, 1, 4096]} and exits == {(7, 7): 1}
    tally_records(folded * 3, mixed, exits)
    assert exits == {(7, 7): 4}
    decoded: dict = {}
    exits = Counter()
    _tally_events([Event(2, 7, 8, "api_exit", "cuFileRead", [1 << 20, 0, 0, 0, 0, 0, 0], "app")], decoded, exits)
    assert decoded == {7: [1, 0, 0, 0, 0]} and exits == {}


def _opened() -> list[Event]:
    return _calls([], fold=True)  # (the data file's open and its handle's registration)


def _compat_call(t: int, tid: int = 100) -> list[Event]:
    return [
        Event(t, 100, tid, "api_enter", "cuFileRead", [0x5B, 0x7E0000000000, 4096, 0, 0], "app"),
        Event(t + 200, 100, tid, "api_exit", "cuFileRead", [4096, 1, 7, SYS_ID["pread64"], 1, 4096, 0], "app"),
    ]


def test_a_call_whose_exit_a_stop_counted_is_not_decided_again():
    # The stop classified the call's start but not its exit (its deadline, a dropped backlog, the
    # kernel's full ring): the exit is counted as the I/O, and flush must not also decide the call
    # held in flight as if it had ended without it. Before, the I/O counted twice.
    from gdsdiag.trace.model.classify import Classifier
    from gdsdiag.trace.result import tally_events as _tally_events

    clf = Classifier()
    for e in _opened() + _compat_call(1000) + _compat_call(5000, tid=101)[:1]:
        clf.feed(e)
    unsent: dict = {}
    exits: Counter = Counter()
    _tally_events(_compat_call(5000, tid=101)[1:], unsent, exits)
    clf.exits_counted(exits)
    clf.flush()
    vs = clf.drain()
    assert [v["tid"] for v in vs] == [100], vs  # the first call only, decided with its exit
    assert unsent == {100: [1, 1, 4096, 1, 4096]}  # the second: one read, counted with its bytes
    # a thread whose call has no exit anywhere (the program killed mid-call) is still decided
    clf = Classifier()
    for e in _opened() + _compat_call(5000, tid=101)[:1]:
        clf.feed(e)
    clf.exits_counted({(100, 102): 1})  # (another thread's)
    clf.flush()
    assert [v["tid"] for v in clf.drain()] == [101]


def test_a_folded_exit_whose_start_was_not_seen_counts_as_one_io(tmp_path):
    # attached mid-call (or the start's record lost): the I/O is counted, with its bytes, and no route
    rec = tmp_path / "mid-call.jsonl"
    with open(rec, "w") as f:
        f.write(json.dumps({"gdsdiag_trace_record": RECORD_VERSION}) + "\n")
        for e in _opened():
            f.write(json.dumps(e.to_list()) + "\n")
        f.write(json.dumps(_compat_call(1000)[1].to_list()) + "\n")  # the exit alone
        for e in _compat_call(5000):
            f.write(json.dumps(e.to_list()) + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    summary = lines[-1]
    assert [x["route"] for x in lines if x["type"] == "io"] == ["COMPAT"]
    assert summary["ios"] == 2, summary
    assert summary["unclassified_by_process"][0]["ios"] == 1
    assert summary["unclassified_by_process"][0]["bytes"] == 4096


def test_calls_held_for_exits_the_kernel_dropped_are_retired_oldest_first():
    # the ring full twice while one thread's calls ran: two starts seen, their exits dropped (the
    # kernel counted both as lost reads), then calls that came whole, then the program killed
    # mid-call. The two oldest held calls are retired; the last is decided, once.
    from gdsdiag.trace.model.classify import Classifier

    clf = Classifier()
    evs = _opened() + _compat_call(1000)[:1] + _compat_call(3000)[:1] + _compat_call(5000) + _compat_call(9000)[:1]
    for e in evs:
        clf.feed(e)
    clf.exits_counted({(100, 100): 2})
    clf.flush()
    assert [v["ts"] for v in clf.drain()] == [5000, 9000]


def _pread(t: int, off: int, tid: int = 100) -> Event:
    return Event(t, 100, tid, "sys_exit", "pread64", [7, 0x7F1000000000, 4096, off, 0, 4096, 900], "app")


def test_a_call_whose_exit_was_dropped_leaves_flight_when_the_threads_next_call_ends():
    # a thread's calls are one after another: once a later call of it ended, an older one still open
    # lost its exit. Held in flight it took that thread's later evidence as its own (here a pread of
    # its offset 10 ms after both calls: the program's own read) and every call's end searched
    # past it. It is set aside instead; at the end it is retired or decided as before.
    from gdsdiag.trace.model.classify import Classifier

    clf = Classifier()
    for e in _opened() + _compat_call(1000)[:1] + _compat_call(3000) + [_pread(10_000_000, 0)]:
        clf.feed(e)
    assert not clf.pending.inflight, clf.pending.inflight
    assert len(clf.pending.orphans[100]) == 1
    clf.exits_counted({(100, 100): 1})  # (the kernel counted the dropped exit as a lost read)
    clf.flush()
    vs = clf.drain()
    assert sorted((v["ts"], v["api"], v["route"]) for v in vs) == [
        (3000, "cuFileRead", "COMPAT"),
        (10_000_000, "pread64", "HOST"),
    ]
    # not counted anywhere (a trace that saw no drop): decided at the end, as before
    clf = Classifier()
    for e in _opened() + _compat_call(1000)[:1] + _compat_call(3000):
        clf.feed(e)
    clf.flush()
    assert [v["ts"] for v in clf.drain()] == [1000, 3000]


def test_many_dropped_exits_keep_flight_short():
    # 20k exits dropped (the ring full), then 20k calls whole: every one of those ended against a
    # 20k-call list before; now the thread has at most its current call in flight
    from gdsdiag.trace.model.classify import Classifier

    clf = Classifier()
    for e in _opened():
        clf.feed(e)
    n = 20_000
    for i in range(n):
        clf.feed(_compat_call(1000 + i * 1000)[0])
    most = 0
    for i in range(n, 2 * n):
        for e in _compat_call(1000 + i * 1000):
            clf.feed(e)
        most = max(most, len(clf.pending.inflight.get(100, ())))
    assert most <= 1, most
    clf.exits_counted({(100, 100): n})
    clf.flush()
    assert len(clf.drain()) == n


def test_a_call_decided_at_its_exit_gets_what_the_hold_would_give():
    """A call whose own thread moved every byte it returned (the folded px USDT hits' bytes equal its
    result) is decided at its exit (Classifier._whole_verdict, its labels and decision worked out once
    per fold shape), not held FINALIZE_NS. Its verdict is what _folded then _verdict give the same
    call after the hold, over random fold shapes: syscalls, descriptors, syscall ids (one unknown),
    USDT hits, probe indexes (one out of range), with and without the handle's registration."""
    import copy
    import random

    from gdsdiag.trace.model.classify import Classifier

    rng = random.Random(21)
    sys_ids = [SYS_ID["pread64"], SYS_ID["pwrite64"], SYS_ID["read"], 999]
    for _ in range(400):
        api = rng.choice(["cuFileRead", "cuFileWrite"])
        ret = rng.choice([4096, 1 << 20, 12345])
        fold = [ret, rng.choice([0, 1, 2, 5]), rng.choice([7, 8, 99]), rng.choice(sys_ids)]
        fold += [rng.choice([1, 3]), ret, rng.choice([0, 1, len(ROUTE_USDT) - 1, 999])]
        clf = Classifier()
        clf.feed(Event(0, 100, 100, "open", "openat", [7, 0, 0, 0, 0, -100, 1], "app", "/data/f.dat"))
        clf.feed(Event(1, 100, 100, "open", "openat", [8, 0, 0, 0, 0, -100, 2], "app", "/data/g.dat"))
        if rng.random() < 0.5:
            clf.feed(Event(2, 100, 100, "handle", "cuFileHandleRegister", [0x5B, 8, 0], "app"))
        clf.feed(Event(1_000, 100, 100, "api_enter", api, [0x5B, 0x7E0000000000, ret, 4096, 0], "app"))
        held = copy.deepcopy(clf.api_stack[(100, 100)][-1])
        end = Event(9_000, 100, 100, "api_exit", api, fold, "app")
        clf.feed(end)
        got = clf.drain()  # at once: no advance, no flush
        held.ret, held.t_end = ret, end.ts
        clf._folded(held, end)
        assert got == [clf._verdict(held)], (api, fold)


def test_a_call_with_evidence_from_other_threads_still_waits_for_it():
    """Workers' chunks (bytes beyond the fold) keep the call held as before: a worker's late
    evidence is still its own."""
    from gdsdiag.trace.model.classify import Classifier

    clf = Classifier()
    evs = _calls([("read", 32 << 20, 16 << 20, 1, 1, 16 << 20)], fold=True)
    for e in evs:
        clf.feed(e)
    assert clf.drain() == []
    clf.flush()
    (v,) = clf.drain()
    assert "pread64 fd 7 ×2" in v["evidence"] and "usdt cufio_core:cufio_px_read ×2" in v["evidence"]
