"""The classifier's fast paths (issue: 100k verdicts/s) give the answers of the slow ones they stand
for: each is checked against that definition, written out here, on streams that reach its edges."""

from __future__ import annotations

import glob
import itertools
import json
import os
import random

from conftest import FIXTURES

from gdsdiag.render.trace_out import _dumps
from gdsdiag.trace.model.classify import Classifier, classify
from gdsdiag.trace.model.dataflow import DIRECT_SCAN, GRANULE_SHIFT, MAX_GRANULES, DataFlow, Source
from gdsdiag.trace.model.events import Event
from gdsdiag.trace.model.evidence import ROUTE_RULES, decide, decide_once
from gdsdiag.trace.recording import read_record

MiB = 1 << 20


def _scan(q, host: int, n: int):
    """The newest of the last DIRECT_SCAN reads whose buffer [host, host + n) overlaps: the linear
    search RecentReads replaces."""
    for k, cand in enumerate(reversed(q)):
        if k >= DIRECT_SCAN:
            break
        if cand.buf is not None and cand.buf < host + n and host < cand.buf + max(cand.size, 1):
            return cand
    return None


def test_recent_reads_find_the_read_the_scan_finds():
    """Reused and fresh buffers, buffers without an address, ones over MAX_GRANULES granules, reads
    leaving the queue at its front, copies inside, across and beside buffers, and copies too wide for
    the index: the same read every time (by identity), None included."""
    big = (MAX_GRANULES + 3) << GRANULE_SHIFT
    for seed in range(4):
        rng = random.Random(seed)
        df = DataFlow(lambda pid: pid)
        bases = [0x7F0000000000 + k * rng.choice([4096, 1 << 16, MiB, 3 * MiB]) for k in range(30)]
        checked = hits = 0
        for i in range(4000):
            pid = rng.choice((1, 2))
            r = rng.random()
            if r < 0.5:
                buf = None if rng.random() < 0.05 else rng.choice(bases) + rng.choice((0, 0, 512, 4096, 100_000))
                size = rng.choice((0, 1, 4096, 65536, MiB, 8 * MiB, big))
                df.add_read(Source(pid, pid, i, "/data/f", 0, size, buf, None))
            elif r < 0.55:
                q = df.by_pid.get(pid)
                for _ in range(rng.randrange(1, 40)):
                    if q:
                        q.popleft()  # (as advance, _oldest and MAX_WAITING drop them)
            else:
                q = df.by_pid.get(pid)
                if not q:
                    continue
                host = rng.choice(bases) + rng.choice((0, 1024, 4096, -4096, MiB, 2 * MiB, -MiB))
                n = rng.choice((1, 16, 4096, MiB, 64 * MiB, big))
                want = _scan(q, host, n)
                assert df._newest_read_of(pid, q, host, n) is want, (seed, i)
                checked += 1
                hits += want is not None
        assert checked > 1000 and 0.2 * checked < hits < checked  # (both answers were asked for often)


def _walk(clf: Classifier, pid: int) -> int:
    """job_of by its definition: the topmost traced ancestor."""
    seen = 0
    p = clf.procs.get(pid)
    while p is not None and p.get("ppid") in clf.procs and seen < 64:
        pid = p["ppid"]
        p = clf.procs.get(pid)
        seen += 1
    return pid


def test_job_of_follows_processes_and_parents_as_they_come():
    """A reader seen before its parent (adopted later), a fork, an exec, an exit and a parent traced
    last: the remembered job is always the walk's."""
    clf = Classifier()
    stream = [
        Event(1, 300, 300, "open", "openat", [7, 0, 0], "w", "/data/x"),
        Event(2, 300, 300, "sys_exit", "pread64", [7, 0x1000, 8192, 0, 0, 8192, 10], "w"),
        Event(3, 200, 200, "proc", "adopt", [1], "main", "/usr/bin/main"),
        Event(4, 300, 300, "proc", "adopt", [200], "w", "/usr/bin/w"),
        Event(5, 300, 300, "proc", "fork", [300, 400], "w"),
        Event(6, 400, 400, "proc", "exec", [], "x", "/usr/bin/x"),
        Event(7, 100, 100, "proc", "fork", [100, 200], "init"),
        Event(8, 400, 400, "proc", "exit", [400], "x"),
        Event(10, 100, 100, "proc", "exec", [], "init", "/sbin/init"),  # (100 traced now: the top)
    ]
    for e in stream:
        clf.feed(e)
        for pid in (100, 200, 300, 400, 500):
            assert clf.job_of(pid) == _walk(clf, pid), (e, pid)
    assert clf.job_of(400) == 100 and clf.job_of(500) == 500
    clf.cgroup_job = True
    assert clf.job_of(400) == 0


def test_route_rules_are_decided_once_as_decide_decides():
    kinds = sorted(
        set().union(*(r.any_of | r.all_of for r in ROUTE_RULES)) | {"cpu_k", "bb", "retry", "other", "nvfs_k"}
    )
    for k in range(len(kinds) + 1):
        for combo in itertools.combinations(kinds, k):
            route, sub, conf, notes = decide(set(combo))
            assert decide_once(set(combo)) == (route, sub, conf, tuple(notes))


def test_json_lines_are_json_dumps():
    """Every verdict of every committed recording, and values no verdict has yet."""
    n = 0
    for f in sorted(glob.glob(os.path.join(FIXTURES, "trace", "**", "*.jsonl.gz"), recursive=True)):
        header, events = read_record(f)
        for v in classify(events, record_version=int(header.get("gdsdiag_trace_record", 1))):
            assert _dumps(v) == json.dumps(v)
            n += 1
    assert n > 100
    odd = {"s": 'é"\\\n\x00', "f": 1.5, "nan": float("nan"), "inf": -float("inf"), "big": 1 << 70, "t": True}
    assert _dumps(odd) == json.dumps(odd)


def test_poll_orders_held_and_new_events_as_one_full_sort_would():
    """Probes._in_order (poll: only the held events younger than the oldest new one are sorted
    again) against sorting everything held and new at every poll, as poll did: the same events in
    the same order at every cut, over random batches with the disorder the rings have (records of
    other CPUs, syscalls stamped at their enter; equal timestamps too)."""
    import bisect
    import random

    from gdsdiag.trace.model.events import Event
    from gdsdiag.trace.probes.bpf import Probes

    rnd = random.Random(21)
    p = Probes.__new__(Probes)  # (only the held-events state: no probes loaded)
    p._held, p._held_ts = [], []
    ref_held: list = []
    t = 0
    for poll in range(300):
        new = []
        for _ in range(rnd.choice([0, 1, 5, 50, 400])):
            t += rnd.choice([0, 1, 100, 1000])
            new.append(Event(t - rnd.choice([0, 0, 0, 50, 3000, 40_000]), 1, 1, "sys_exit", "pread64", [poll]))
        rnd.shuffle(new[: len(new) // 3])
        want = ref_held + list(new)
        want.sort(key=lambda e: e.ts)
        got, ts = p._in_order(list(new))
        assert [id(e) for e in got] == [id(e) for e in want] and ts == [e.ts for e in got]
        cut = t - rnd.choice([0, 500, 20_000, 10**9])
        i = bisect.bisect_right(ts, cut)
        p._held, p._held_ts = got[i:], ts[i:]
        ref_held = want[i:]


def test_the_collectors_streaming_pace_is_set_for_the_stream_and_undone_after() -> None:
    """gcpace.streaming: while events stream, the start-up heap is frozen and the young and middle
    generations are collected at the slower pace; after, the thresholds are the caller's again, also
    when the stream raises, and nothing stays frozen, unless the caller had frozen objects of its own:
    those stay frozen (run in fresh interpreters: the suite's own process may have frozen some)."""
    import subprocess
    import sys

    script = """
import gc, sys
from gdsdiag.trace.gcpace import STREAM_THRESHOLD, streaming
at_start = gc.get_freeze_count()  # (Python 3.12 starts with some frozen: the interpreter's own)
if sys.argv[1] == "caller-froze":
    keep = [[i] for i in range(1000)]
    gc.freeze()
before, frozen = gc.get_threshold(), gc.get_freeze_count()
assert before != STREAM_THRESHOLD
for fail in (False, True):
    try:
        with streaming():
            assert gc.get_threshold() == STREAM_THRESHOLD
            assert gc.get_freeze_count() > 0
            if fail:
                raise KeyError("the stream's own error")
    except KeyError:
        assert fail
    assert gc.get_threshold() == before
    if frozen > at_start:
        assert gc.get_freeze_count() >= frozen, (gc.get_freeze_count(), frozen)
    else:
        assert gc.get_freeze_count() == 0, gc.get_freeze_count()
print("ok", frozen > at_start)
"""
    for case, froze in (("nothing-frozen", "False"), ("caller-froze", "True")):
        r = subprocess.run([sys.executable, "-c", script, case], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.split() == ["ok", froze], (case, r.stdout, r.stderr[-2000:])
