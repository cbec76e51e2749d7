"""When the events ring is full the kernel counts what it could not send, per process, and the reads
among the lost events with their bytes (issue 21: the totals stay exact). Real probes on this
kernel: a child does more 4 KiB preads than the ring holds while nothing reads the ring, so the
kernel has to drop; every read must then be either a record that arrived or a lost read counted in
the kernel, and the lost bytes must be the lost reads' bytes."""

import os
import subprocess
import sys

from conftest import live

READS = 250_000  # the 16 MiB ring holds ~140k records
# The child says it is ready only after its start-up and open: the interpreter's own start-up calls
# pread64 too (the dynamic loader reads ELF headers: one 784-byte read at offset 64 made a CI run
# count READS + 1), so it must not be traced before then.
CHILD = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.write(1, b"r")
os.read(0, 1)
for i in range(int(sys.argv[2])):
    os.pread(fd, 4096, (i % 256) * 4096)
"""


@live
def test_a_full_ring_counts_every_lost_read_and_its_bytes(tmp_path):
    from gdsdiag.trace.probes.bpf import Probes

    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 20))
    p = Probes([], [], trace_all=False, want_kprobes=False, preattach=False, per_io=True)
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(data), str(READS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert child.stdout.read(1) == b"r"
        p.add_pid(child.pid)
        child.stdin.write(b"g")
        child.stdin.close()
        assert child.wait(120) == 0  # (the ring is not read meanwhile: it fills and the kernel drops)
        evs = p.poll(0, final=True)
        while True:
            more = p.poll(0, final=True)
            if not more:
                break
            evs += more
        sent = [e for e in evs if e.kind == "sys_exit" and e.name == "pread64" and e.pid == child.pid]
        lost = {r["pid"]: r for r in p.lost_by_process()}
        assert child.pid in lost, p.lost_by_process()
        row = lost[child.pid]
        assert row["ios"] > 0
        assert len(sent) + row["ios"] == READS  # every read: sent, or counted as lost
        assert row["bytes"] == 4096 * row["ios"]
        assert row["reads"] == row["ios"] and row["read_bytes"] == row["bytes"]  # (preads only)
        assert all(e.args[5] == 4096 for e in sent)
        assert p.lost >= row["lost"] >= row["ios"]
    finally:
        p.close()


def test_records_not_classified_are_tallied_exactly_per_process():
    """tally_records (what a stop drops undecoded) against decoding each record: events per process,
    and among them the reads and writes with the bytes they moved (a failed one moved none)."""
    import random

    from gdsdiag.trace.probes.bpf import IO_SYSCALLS, REC_STRUCT, tally_records

    rnd = random.Random(7)
    comm = b"python3".ljust(16, b"\0")
    recs, want = [], {}
    for _ in range(5000):
        pid = rnd.choice([101, 202, 303])
        typ = rnd.choice([5, 5, 5, 3, 6])  # sys_exit mostly, else other kinds
        sid = rnd.choice([1, 2, 10, 11, 12, 7, 30, 3])
        ret = rnd.choice([4096, 65536, 0, -4, 12])
        recs.append(REC_STRUCT.pack(1, pid, pid + rnd.randint(0, 2), typ, sid, 0, 0, 0, 0, 0, ret, 0, comm))
        row = want.setdefault(pid, [0, 0, 0, 0, 0])
        row[0] += 1
        if typ == 5 and sid in IO_SYSCALLS:
            row[1] += 1
            row[2] += max(ret, 0)
            if IO_SYSCALLS[sid]:
                row[3] += 1
                row[4] += max(ret, 0)
    got: dict = {}
    tally_records(b"".join(recs), got)
    assert got == want

    def by_decoding(blobs):
        rows: dict = {}
        for b in blobs:
            f = REC_STRUCT.unpack(b)
            row = rows.setdefault(f[1], [0, 0, 0, 0, 0])
            row[0] += 1
            if f[3] == 5 and f[4] in IO_SYSCALLS:
                row[1] += 1
                row[2] += max(f[10], 0)
                if IO_SYSCALLS[f[4]]:
                    row[3] += 1
                    row[4] += max(f[10], 0)
        return rows

    # one process (its threads and kinds mixed), and blocks of identical records (the column fast path)
    for subset in (
        [r for r in recs if REC_STRUCT.unpack(r)[1] == 202],
        [recs[0]] * 1000,
        [recs[1]] * 7 + [recs[2]],
        [REC_STRUCT.pack(1, 5, 6, 5, 1, 0, 0, 0, 0, 0, 4096, 0, comm)] * 999,
    ):
        got = {}
        tally_records(b"".join(subset), got)
        assert got == by_decoding(subset)
    one: dict = {}  # the one-kind fast path
    tally_records(REC_STRUCT.pack(1, 9, 9, 5, 1, 0, 0, 0, 0, 0, -11, 0, comm) * 3, one)
    assert one == {9: [3, 3, 0, 3, 0]}


def test_a_replay_summary_says_nothing_was_lost_or_left_unclassified():
    """The summary's fields for I/O the kernel could not send or a stop could not classify (issue 21)
    are there in every summary, replays of committed recordings included (nothing lost there: zero),
    so a reader of the JSON never has to guess whether they were counted."""
    import json

    here = os.path.dirname(os.path.abspath(__file__))
    rec = os.path.join(here, "fixtures", "trace", "trace-h200-cufile.jsonl.gz")
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--replay", rec],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.path.dirname(here)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    summ = json.loads(r.stdout.splitlines()[-1])
    assert summ["type"] == "summary"
    assert (summ["ios_lost_in_kernel"], summ["bytes_lost_in_kernel"]) == (0, 0)
    assert summ["unclassified_by_process"] == [] and summ["verdicts_not_printed"] == 0


def test_a_flush_past_its_deadline_counts_the_held_reads_instead_of_deciding_them():
    """After a signal the classifier's final decision of the reads it holds for a CUDA copy (up to
    65,536 per process, ~6 µs each) has a deadline (session.STOP_FLUSH_S): past it, what is still held
    is counted per process with its reads and bytes, never decided by guess and never dropped. The
    same stream flushed without a deadline decides every read; the two account for the same I/O."""
    import time

    from gdsdiag.trace.model.classify import Classifier
    from gdsdiag.trace.model.events import Event

    def stream(n):
        yield Event(0, 100, 100, "open", "openat", [7], "app", "/data/f.dat")
        yield Event(1, 100, 100, "api_enter", "cuMemcpy", [0x7E0000000000, 0x7D0000000000, 64, 1], "app")
        for i in range(n):  # reads of a CUDA process, none of them copied yet: held for a copy
            yield Event(
                1000 + i * 2000,
                100,
                100,
                "sys_exit",
                "pread64",
                [7, 0x7F0000000000 + i * 4096, 4096, i * 4096, 0, 4096, 900],
                "app",
            )

    n = 5000
    whole = Classifier()
    for e in stream(n):
        whole.feed(e)
    whole.flush()
    decided = [v for v in whole.drain() if v["api"] == "pread64"]
    assert len(decided) == n and whole.unclassified == {}

    cut = Classifier()
    for e in stream(n):
        cut.feed(e)
    held = cut.drain()  # (what the trace already printed while it ran)
    cut.flush(deadline=time.monotonic() - 1)  # the budget is already spent
    out = [v for v in held + cut.drain() if v["api"] == "pread64"]
    row = cut.unclassified[100]
    assert row[1] > n // 2  # most of the reads were still held
    assert len(out) + row[1] == n  # every read is a verdict or counted
    assert row[3] == row[1] and row[4] == row[2] == 4096 * row[1]  # reads, with their bytes


def test_the_decoder_names_every_kind_of_record_as_the_tables_do():
    """Probes._decode names each record by one lookup per (type, id), cached (_record_name): every
    kind of the events ring, an unknown type and id, USDT records cut to their argument count and
    named by the sites attached, and a handle registration with its descriptor's path, against
    the name tables themselves."""
    from gdsdiag.trace.model.events import API_NAMES, FD_NAMES, KINDS, PROC_NAMES, SYS_NAMES
    from gdsdiag.trace.probes.bpf import REC_STRUCT, Probes

    comm = b"app".ljust(16, b"\0")
    me = os.getpid()
    fd = os.open(__file__, os.O_RDONLY)
    try:
        rows = []
        for typ, kind in sorted(KINDS.items()):
            for rid in (0, 1, 2, 3, 777):
                rows.append((typ, kind, rid))
        rows.append((99, "99", 1))
        recs = []
        for i, (typ, _kind, rid) in enumerate(rows):
            a6 = 3 if KINDS.get(typ) == "usdt" else 6
            recs.append(REC_STRUCT.pack(i, me, me, typ, rid, 10, fd, 12, 13, 14, 15, a6, comm))
        p = Probes.offline()
        p.usdt_names = {1: "s:p"}
        p._keep(b"".join(recs), len(recs))
        p._decode()
        for (_typ, kind, rid), e in zip(rows, p._events):
            assert (e.kind, e.comm) == (kind, "app")
            want = {
                "sys_exit": SYS_NAMES.get(rid, str(rid)),
                "usdt": {1: "s:p"}.get(rid, f"usdt#{rid}"),
                "fd": FD_NAMES.get(rid, str(rid)),
                "proc": PROC_NAMES.get(rid, str(rid)),
                "pages": "page_cache_fill",
                "majflt": "major_fault",
                "blk_issue": "block_rq_issue",
                "blk_done": "block_rq_complete",
            }.get(kind, API_NAMES.get(rid, str(rid)))
            assert e.name == want, (kind, rid, e.name)
            # (a fork's a2 is the reader's: whether the child is a thread of the parent, bpf._is_thread)
            a2 = 0 if (kind, e.name) == ("proc", "fork") else 12
            assert e.args == ([10, fd, 12] if kind == "usdt" else [10, fd, a2, 13, 14, 15, 6])
            if kind == "handle" and e.name == "cuFileHandleRegister":
                assert e.path == os.path.realpath(__file__)
            else:
                assert e.path is None
    finally:
        os.close(fd)
