"""Names users recognise (issue 43 goal 3), each rule on the smallest event stream that shows it: a
file written under a temporary name and renamed (rename, renameat2, linkat of an O_TMPFILE) is
reported under its final name; io_uring registered files and buffers resolve like plain fds. The
events are the ones the probes send (probes/cufile_trace.c rename_exit, uring_register_exit,
io_uring_complete); tests/test_trace_names_live.py runs real programs under the tracer."""

from __future__ import annotations

import json
import os
import subprocess
import time

from conftest import FIXTURES, GDSDIAG

from gdsdiag.routes import Route
from gdsdiag.trace.model.classify import Classifier
from gdsdiag.trace.model.counted import CountedIo
from gdsdiag.trace.model.events import Event

MiB = 1 << 20
O_WRONLY_CREAT, O_TMPFILE = 0o101, 0o20200001  # (O_TMPFILE | O_WRONLY, as open(2) gets it)
D = "/data/ckpt"


def ev(ts_ms, kind, name, args, pid=100, path=None, comm="app"):
    return Event(int(ts_ms * 1_000_000), pid, pid, kind, name, list(args), comm, path)


def opened(ts_ms, fd, path, flags=O_WRONLY_CREAT, serial=0):
    return ev(ts_ms, "open", "openat", [fd, flags, 0, 0, 0, -100, serial], path=path)


def write(ts_ms, fd, buf, size, off):
    return ev(ts_ms, "sys_exit", "pwrite64", [fd, buf, size, off, 0, size, 1000])


def d2h(ts_ms, dst, n):
    return ev(ts_ms, "api_enter", "cuMemcpy", [dst, 0x7E0000000000, n, 2])


def renamed(ts_ms, old, new, name="rename", args=(-100, -100, 0)):
    return ev(ts_ms, "rename", name, args, path=old + "\0" + new)


def run(events, end_ms=None):
    c = Classifier()
    for e in events:
        c.feed(e)
    if end_ms is not None:
        c.advance(int(end_ms * 1_000_000))
    c.flush()
    return c, c.drain()


def saved(rename_ms):
    """A checkpoint writer: a GPU tensor brought to the host, written to a temporary file, renamed."""
    return [
        opened(0, 5, f"{D}/model.safetensors.tmp"),
        d2h(1, 0x7F1000000000, 4 * MiB),
        write(2, 5, 0x7F1000000000, 4 * MiB, 0),
        d2h(3, 0x7F1000000000, 4 * MiB),
        write(4, 5, 0x7F1000000000, 4 * MiB, 4 * MiB),
        ev(5, "fd", "close", [5]),
        renamed(rename_ms, f"{D}/model.safetensors.tmp", f"{D}/model.safetensors"),
    ]


def test_a_rename_before_the_verdicts_names_them_and_the_file_by_the_final_name():
    """os.replace right after the writes (before the writes' 100 ms hold ends): each verdict comes
    out under the final name, the temporary one in its evidence; the file has one account."""
    c, vs = run(saved(6))
    assert [(v["path"], v["route"], v["confidence"]) for v in vs] == [
        (f"{D}/model.safetensors", Route.DRAM_BOUNCE, "high")
    ] * 2
    assert all(
        v["evidence"][-1] == f"written as {D}/model.safetensors.tmp, renamed to {D}/model.safetensors" for v in vs
    )
    (f,) = c.file_summary()
    assert f["path"] == f"{D}/model.safetensors" and f["renamed_from"] == [f"{D}/model.safetensors.tmp"]
    assert f["bytes"] == 8 * MiB and f["routes"] == {Route.DRAM_BOUNCE: 8 * MiB}
    (t,) = c.tree_summary()
    assert t["routes"] == {Route.DRAM_BOUNCE: 8 * MiB}


def test_a_rename_after_the_verdicts_were_printed_moves_the_files_account():
    """The verdicts were decided (and printed) under the temporary name; the summary's file is the
    final name, with renamed_from."""
    c = Classifier()
    out = []
    for e in saved(6)[:-1]:
        c.feed(e)
    c.advance(500_000_000)
    out += c.drain()
    assert {v["path"] for v in out} == {f"{D}/model.safetensors.tmp"}
    c.feed(saved(600)[-1])
    c.flush()
    assert c.drain() == []
    (f,) = c.file_summary()
    assert (f["path"], f["renamed_from"], f["bytes"]) == (
        f"{D}/model.safetensors",
        [f"{D}/model.safetensors.tmp"],
        8 * MiB,
    )


def test_a_checkpoint_saved_again_over_its_last_copy_is_one_file_and_an_older_io_keeps_its_file():
    """Rotation: ckpt.pt -> ckpt.pt.old, then ckpt.pt.tmp -> ckpt.pt. Each I/O is named after its
    own file: the first save ends as ckpt.pt.old, the second as ckpt.pt."""
    s = [
        opened(0, 5, f"{D}/ckpt.pt"),
        write(1, 5, 0x7F1000000000, MiB, 0),
        ev(2, "fd", "close", [5]),
        opened(3, 5, f"{D}/ckpt.pt.tmp"),
        write(4, 5, 0x7F1000000000, 2 * MiB, 0),
        ev(5, "fd", "close", [5]),
        renamed(6, f"{D}/ckpt.pt", f"{D}/ckpt.pt.old"),
        renamed(7, f"{D}/ckpt.pt.tmp", f"{D}/ckpt.pt"),
    ]
    c, vs = run(s)
    assert sorted((v["path"], v["size"]) for v in vs) == [(f"{D}/ckpt.pt", 2 * MiB), (f"{D}/ckpt.pt.old", MiB)]
    files = {f["path"]: f for f in c.file_summary()}
    assert files[f"{D}/ckpt.pt"]["bytes"] == 2 * MiB and files[f"{D}/ckpt.pt"]["renamed_from"] == [f"{D}/ckpt.pt.tmp"]
    assert files[f"{D}/ckpt.pt.old"]["bytes"] == MiB


def test_a_directory_renamed_renames_every_file_under_it():
    """A checkpoint written into a temporary directory, then the directory renamed (orbax does)."""
    s = [
        opened(0, 5, f"{D}.tmp/shard-0"),
        write(1, 5, 0x7F1000000000, MiB, 0),
        opened(2, 6, f"{D}.tmp/sub/shard-1"),
        write(3, 6, 0x7F1000000000, MiB, 0),
        renamed(4, f"{D}.tmp", D),
        write(5, 6, 0x7F1000000000, MiB, MiB),  # (through a descriptor still open: the new name)
    ]
    c, vs = run(s)
    assert sorted(v["path"] for v in vs) == [f"{D}/shard-0", f"{D}/sub/shard-1", f"{D}/sub/shard-1"]
    assert {f["path"]: f["bytes"] for f in c.file_summary()} == {f"{D}/shard-0": MiB, f"{D}/sub/shard-1": 2 * MiB}


def test_an_o_tmpfile_linked_by_its_descriptor_or_through_proc_gets_its_name():
    """open(dir, O_TMPFILE) then linkat(fd, "", …, AT_EMPTY_PATH) or linkat(AT_FDCWD,
    "/proc/self/fd/N", …, AT_SYMLINK_FOLLOW); a plain hard link of a named file renames nothing."""
    s = [
        opened(0, 5, D, O_TMPFILE, serial=4097),
        write(1, 5, 0x7F1000000000, MiB, 0),
        ev(2, "rename", "linkat", [5, -100, 0x1000], path="\0" + f"{D}/a.pt"),
        opened(3, 6, D, O_TMPFILE, serial=8193),
        write(4, 6, 0x7F1000000000, MiB, 0),
        ev(5, "rename", "linkat", [-100, -100, 0x400], path="/proc/self/fd/6\0" + f"{D}/b.pt"),
        opened(6, 7, f"{D}/c.pt"),
        write(7, 7, 0x7F1000000000, MiB, 0),
        ev(8, "rename", "linkat", [-100, -100, 0], path=f"{D}/c.pt\0{D}/c-link.pt"),
        ev(9, "rename", "linkat", [7, -100, 0x1000], path=f"\0{D}/c-link2.pt"),  # (a named file's fd: a hard link)
    ]
    c, vs = run(s)
    assert sorted(v["path"] for v in vs) == [f"{D}/a.pt", f"{D}/b.pt", f"{D}/c.pt"]
    assert [v["evidence"][-1] for v in vs if v["path"] == f"{D}/a.pt"] == [
        f"written as {D}/(unnamed O_TMPFILE, fd 5), renamed to {D}/a.pt"
    ]
    assert sorted(f["path"] for f in c.file_summary()) == [f"{D}/a.pt", f"{D}/b.pt", f"{D}/c.pt"]


def test_counted_host_io_is_named_by_the_final_name():
    """A writer without CUDA (its writes counted in the kernel, by open serial): the counter's row
    names the file it became, renamed_from the name it was written as (counted.CountedIo reads the
    rename as the classifier resolved it)."""
    c, counter = Classifier(), CountedIo()
    s = [
        opened(0, 5, f"{D}/x.tmp", serial=4097),
        opened(1, 6, D, O_TMPFILE, serial=8193),
        renamed(2, f"{D}/x.tmp", f"{D}/x.bin"),
        ev(3, "rename", "linkat", [6, -100, 0x1000], path="\0" + f"{D}/y.bin"),
        ev(4, "rename", "rename", [-100, -100, 0], path="lib.pyc.123\0lib.pyc"),  # (relative, not resolved here)
        ev(9, "counted", "write", [4097, 21, 4, 4 * MiB, 0, 4000, 0]),
        ev(9, "counted", "write", [8193, 21, 1, MiB, 0, 1000, 0]),
    ]
    for e in s:
        c.feed(e)
        counter.feed(e)
    rows = {r["path"]: r for r in counter.rows(c._path_ok)}
    assert rows[f"{D}/x.bin"]["renamed_from"] == f"{D}/x.tmp" and rows[f"{D}/x.bin"]["bytes"] == 4 * MiB
    assert rows[f"{D}/y.bin"]["renamed_from"] == f"{D}/(unnamed O_TMPFILE, fd 6)"
    # and in the per-file books (Classifier.add_counted), under the final name, with renamed_from
    c.add_counted(list(rows.values()))
    files = {f["path"]: f for f in c.file_summary()}
    assert files[f"{D}/x.bin"]["renamed_from"] == [f"{D}/x.tmp"] and files[f"{D}/x.bin"]["bytes"] == 4 * MiB


# -- io_uring registered files and buffers -------------------------------------------------------------
RING = 3


def register(ts_ms, op, first, total, payload, k=None, ring=RING):
    """One io_uring_register record: a1 opcode | entries << 8, a2 first index, a3 the call's entries."""
    if k is None:
        k = min(6, max(total - first, 0)) if op in (2, 6, 13, 14) else (1 if total else 0)
    return ev(ts_ms, "sys_exit", "io_uring_register", [ring, op | k << 8, first, total, *payload])


def fds(*v):
    """Six s32 descriptors packed two per s64, as the probe reads them."""
    v = list(v) + [0] * (6 - len(v))
    return [(v[i] & 0xFFFFFFFF | (v[i + 1] & 0xFFFFFFFF) << 32) - ((1 << 64) if v[i + 1] < 0 else 0) for i in (0, 2, 4)]


def uring(ts_ms, index, buf, size, off, op=4, fixed=True, ring=RING, name="io_uring_rw"):
    a2 = op | (ring + 1) << 32 if name == "io_uring_rw" else op
    a1 = buf if name == "io_uring_rw" else 12345  # (the older record: user_data)
    return ev(ts_ms, "sys_exit", name, [index, a1, a2, off, 1 if fixed else 0, size, 1000])


def test_fixed_file_reads_resolve_to_the_registered_files_path_and_buffer():
    """IORING_REGISTER_BUFFERS (two), IORING_REGISTER_FILES [fd 5, -1] and the fd closed; a
    READ_FIXED through file #0 into registered buffer #1; then IORING_REGISTER_FILES_UPDATE puts
    another file at #0. Each read is named by its file and has its buffer address: a copy of that
    buffer to the GPU makes it DRAM_BOUNCE, high (the address proves it)."""
    s = [
        register(0, 0, 0, 2, [0x7F1000000000, MiB, 0]),
        register(0, 0, 1, 2, [0x7F1000100000, MiB, 0]),
        opened(1, 5, "/models/a.bin"),
        opened(1, 6, "/models/b.bin"),
        register(2, 2, 0, 2, fds(5, -1)),
        ev(3, "fd", "close", [5]),
        uring(4, 0, 0x7F1000100000, MiB, 0),
        ev(5, "api_enter", "cuMemcpy", [0x7E0000000000, 0x7F1000100000, MiB, 1]),
        register(6, 6, 0, 1, fds(6), k=1),
        uring(7, 0, 0x7F1000000000, MiB, MiB),
        uring(8, 1, 0x7F1000000000, MiB, 0),
    ]
    c, vs = run(s, end_ms=10_000)
    by = [(v["path"], v["offset"], v["route"], v["confidence"]) for v in vs]
    assert ("/models/a.bin", 0, Route.DRAM_BOUNCE, "high") in by
    assert ("/models/b.bin", MiB, Route.HOST, "medium") in by
    a = next(v for v in vs if v["path"] == "/models/a.bin")
    assert "into host memory 0x7f1000100000" in a["evidence"][0]
    assert "registered file #0 (fd 5 when registered)" in a["evidence"][0]
    assert "in registered buffer #1 (0x7f1000100000, 1048576 bytes)" in a["evidence"][0]
    sparse = next(v for v in vs if v["offset"] == 0 and v["path"] != "/models/a.bin")
    assert sparse["path"] == "<io_uring fixed file 1>" and "not a data file the trace named" in sparse["evidence"][0]
    assert {f["path"] for f in c.file_summary()} >= {"/models/a.bin", "/models/b.bin"}


def test_a_table_larger_than_the_probe_sends_is_said_and_unregister_forgets():
    s = [
        opened(0, 5, "/models/a.bin"),
        register(1, 2, 0, 1000, fds(5, 5, 5, 5, 5, 5)),
        uring(2, 700, 0x7F1000000000, MiB, 0, op=22),
        uring(3, 0, 0x7F1000000000, MiB, MiB, op=22),
        register(4, 3, 0, 0, [0, 0, 0], k=0),
        uring(5, 0, 0x7F1000000000, MiB, 2 * MiB, op=22),
    ]
    _, vs = run(s, end_ms=10_000)
    by = {v["offset"]: v for v in vs}
    assert by[0]["path"] == "<io_uring fixed file 700>"
    assert "the ring registered 1000 files, the first 384 are traced" in by[0]["evidence"][0]
    assert by[MiB]["path"] == "/models/a.bin"
    assert by[2 * MiB]["path"] == "<io_uring fixed file 0>"


def test_the_older_io_uring_record_replays_as_before():
    """Recordings before io_uring_rw: a1 is user_data, not an address; a fixed file is not named."""
    s = [
        opened(0, 5, "/models/a.bin"),
        uring(1, 5, 0, MiB, 0, op=22, fixed=False, name="io_uring"),
        uring(2, 0, 0, MiB, MiB, op=22, name="io_uring"),
    ]
    _, vs = run(s, end_ms=10_000)
    assert [(v["path"], v["evidence"][0]) for v in vs] == [
        ("/models/a.bin", "io_uring fd 5 (io_uring request (buffer address not traced))"),
        (
            "<io_uring fixed file 0>",
            "io_uring fd 0 (io_uring request on registered file #0 (its path is not known: no registration of the "
            "ring's files was traced))",
        ),
    ]


# -- threads under their process ------------------------------------------------------------------------
def test_a_thread_is_counted_under_its_process_not_listed_as_one():
    """sched_process_fork fires for threads too; the reader marks a thread (a2 1: its tid is in the
    parent's /proc task directory, bpf._is_thread), a fork of a process stays a process. Recordings
    made before (a2 0) list every fork, as they did."""
    from gdsdiag.trace.result import process_rows as _processes

    c = Classifier()
    for e in (
        ev(0, "proc", "fork", [100, 101, 1, 0, 0, 0, 0]),
        ev(1, "proc", "fork", [100, 102, 1, 0, 0, 0, 0]),
        ev(2, "proc", "fork", [100, 200, 0, 0, 0, 0, 0]),
    ):
        c.feed(e)
    procs = {p["pid"]: p for p in _processes(c)}
    assert sorted(procs) == [100, 200] and procs[100]["threads"] == 2 and "threads" not in procs[200]
    assert procs[200]["ppid"] == 100
    # a thread gone before the reader looked (a2 0): the kernel's thread_exit puts it under its process
    c.feed(ev(3, "proc", "fork", [100, 103, 0, 0, 0, 0, 0]))
    assert 103 in {p["pid"] for p in _processes(c)}
    c.feed(ev(4, "proc", "thread_exit", [100, 103, 0, 0, 0, 0, 0]))
    procs = {p["pid"]: p for p in _processes(c)}
    assert sorted(procs) == [100, 200] and procs[100]["threads"] == 3


def test_renameat2_exchange_swaps_the_two_names():
    """renameat2(RENAME_EXCHANGE): each file takes the other's name (a new checkpoint swapped in,
    the old one kept under the temporary name)."""
    c, counter = Classifier(), CountedIo()
    s = [
        opened(0, 5, f"{D}/live.pt", serial=4097),
        write(1, 5, 0x7F1000000000, MiB, 0),
        opened(2, 6, f"{D}/next.pt", serial=8193),
        write(3, 6, 0x7F1000000000, 2 * MiB, 0),
        renamed(4, f"{D}/next.pt", f"{D}/live.pt", "renameat2", (-100, -100, 2)),
        ev(9, "counted", "write", [4097, 21, 1, MiB, 0, 1000, 0]),
    ]
    for e in s:
        c.feed(e)
        counter.feed(e)
    c.flush()
    assert sorted((v["path"], v["size"]) for v in c.drain()) == [(f"{D}/live.pt", 2 * MiB), (f"{D}/next.pt", MiB)]
    files = {f["path"]: (f["bytes"], f["renamed_from"]) for f in c.file_summary()}
    assert files == {f"{D}/live.pt": (2 * MiB, [f"{D}/next.pt"]), f"{D}/next.pt": (MiB, [f"{D}/live.pt"])}
    (row,) = counter.rows(c._path_ok)
    assert (row["path"], row["renamed_from"]) == (f"{D}/next.pt", f"{D}/live.pt")


def test_a_stream_of_renames_costs_bounded_time():
    """A recording is a stranger's: 20,000 renames over 2,000 open descriptors, a rename walk each,
    stay well under a second (the walks stop at RENAME_WORK_MAX; the accounts still move)."""
    c = Classifier()
    for fd in range(2000):
        c.feed(opened(0, 10 + fd, f"{D}/f{fd}"))
    c.feed(write(1, 10, 0x7F1000000000, MiB, 0))
    c.advance(500_000_000)
    t = time.perf_counter()
    for i in range(20_000):
        c.feed(renamed(600 + i / 1000, f"{D}/f0" if i == 0 else f"{D}/g{i - 1}", f"{D}/g{i}"))
    assert time.perf_counter() - t < 5
    assert [f["path"] for f in c.file_summary()] == [f"{D}/g19999"]


def test_a_sparse_table_filled_by_updates_and_buffers_updated():
    """IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE (the probe sends 0 entries: an empty
    table), IORING_REGISTER_FILES_UPDATE2 at entry 3, IORING_REGISTER_BUFFERS_UPDATE at entry 2, and
    an update with IORING_REGISTER_FILES_SKIP (-2) that leaves entry 3 as it is."""
    s = [
        opened(0, 5, "/models/a.bin"),
        register(1, 13, 0, 0, [0, 0, 0], k=0),
        register(2, 14, 3, 1, fds(5), k=1),
        register(3, 16, 2, 1, [0x7F1000000000, MiB, 0], k=1),
        register(4, 6, 3, 1, fds(-2), k=1),
        ev(5, "fd", "close", [5]),
        uring(6, 3, 0x7F1000000000 + 4096, MiB - 4096, 0),
    ]
    _, vs = run(s, end_ms=10_000)
    (v,) = vs
    assert v["path"] == "/models/a.bin"
    assert "registered file #3 (fd 5 when registered), in registered buffer #2 (0x7f1000000000" in v["evidence"][0]


# -- recordings of the live programs (tests/fixtures/trace/names/README.md), replayed -----------------------
def _replayed(name):
    rec = os.path.join(FIXTURES, "trace", "names", name)
    r = subprocess.run([*GDSDIAG, "trace", "--replay", rec, "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    return [x for x in lines if x["type"] == "io"], lines[-1]


def test_the_recorded_writer_replays_under_the_final_names():
    ios, summ = _replayed("writer.jsonl.gz")
    d = "/var/tmp/gdsdiag-names/w/"
    got: dict[str, int] = {}
    for v in ios:
        if v["path"].startswith(d):
            got[v["path"][len(d) :]] = got.get(v["path"][len(d) :], 0) + v["size"]
    assert got == {"model.safetensors": 4 * MiB, "a.pt": 2 * MiB, "b.pt": MiB, "step-100/shard-0": MiB}
    files = {f["path"][len(d) :]: f.get("renamed_from") for f in summ["files"] if f["path"].startswith(d)}
    assert files["model.safetensors"] == [d + "model.safetensors.tmp"]
    assert files["step-100/shard-0"] == [d + "step.tmp/shard-0"]
    assert files["a.pt"][0].startswith(d + "(unnamed O_TMPFILE, fd ") and files["b.pt"][0].startswith(d + "(unnamed")


def test_the_recorded_uring_program_replays_with_its_files_and_buffers():
    want = []
    with open(os.path.join(FIXTURES, "trace", "names", "uring-fixed.app.txt")) as f:
        for line in f:  # "op <write|read> SIZE OFFSET RESULT BUFFER PATH"
            _, op, size, off, _, buf, path = line.split()
            want.append((op, path, int(off), int(size), int(buf, 16)))
    ios, _ = _replayed("uring-fixed.jsonl.gz")
    got = [
        (v["op"], v["path"], v["offset"], v["size"], int(v["evidence"][0].split("host memory ")[1].split()[0], 16))
        for v in ios
        if v["api"] == "io_uring"
    ]
    assert sorted(got) == sorted(want)


def test_the_recorded_threads_replay_under_their_process():
    with open(os.path.join(FIXTURES, "trace", "names", "threads.app.txt")) as f:
        pid = int(f.read().split()[1])
    _, summ = _replayed("threads.jsonl.gz")
    procs = {p["pid"]: p for p in summ["processes"]}
    assert procs[pid]["threads"] == 26 and len(procs) == 2


def test_a_file_renamed_onto_one_already_counted_keeps_every_processs_bytes_in_the_trees():
    """Another process saves over a file the trace already has an account of (its verdicts were out
    before the rename): the two accounts become one, and each process's bytes stay in its own tree —
    the merged account kept only the file's routes, its per-process bytes were lost, so the trees said
    1 MiB where the files said 3 (one set of books, issue 43 goal 4)."""
    p1 = [
        ev(0, "open", "openat", [5, O_WRONLY_CREAT, 0, 0, 0, -100, 1], pid=100, path=f"{D}/ckpt.pt"),
        ev(1, "sys_exit", "pwrite64", [5, 0x7F1000000000, MiB, 0, 0, MiB, 1000], pid=100),
        ev(2, "fd", "close", [5], pid=100),
    ]
    p2 = [
        ev(10, "open", "openat", [6, O_WRONLY_CREAT, 0, 0, 0, -100, 2], pid=200, path=f"{D}/ckpt.pt.tmp", comm="saver"),
        ev(11, "sys_exit", "pwrite64", [6, 0x7F2000000000, 2 * MiB, 0, 0, 2 * MiB, 1000], pid=200, comm="saver"),
        ev(12, "fd", "close", [6], pid=200, comm="saver"),
    ]
    c = Classifier()
    for e in p1 + p2:
        c.feed(e)
    c.advance(500_000_000)
    c.drain()
    c.feed(renamed(600, f"{D}/ckpt.pt.tmp", f"{D}/ckpt.pt"))
    c.flush()
    c.drain()
    (f,) = c.file_summary()
    assert f["path"] == f"{D}/ckpt.pt" and f["bytes"] == 3 * MiB and f["pids"] == [100, 200]
    trees = {t["root"]: t for t in c.tree_summary()}
    assert sum(sum(t["routes"].values()) for t in trees.values()) == sum(f["routes"].values()) == 3 * MiB
    assert sum(trees[200]["routes"].values()) == 2 * MiB and sum(trees[100]["routes"].values()) == MiB
