"""The data-flow model's rules (gdsdiag/trace/model/dataflow.py), each on the smallest event stream that
shows it. Constructed streams: the shapes are the ones the GPU machine's recordings show
(tests/test_trace_loaders.py replays those); here each rule is pinned down on its own."""

from __future__ import annotations

import pytest

from gdsdiag.routes import Route
from gdsdiag.trace.model.classify import classify
from gdsdiag.trace.model.dataflow import Intervals, staged_ok
from gdsdiag.trace.model.events import Event

MiB = 1 << 20


def ev(ts_us, kind, name, args, pid=100, path=None, comm="app"):
    return Event(int(ts_us * 1000), pid, pid, kind, name, list(args), comm, path)


def read(ts_us, fd, buf, size, off, pid=100):
    return ev(ts_us, "sys_exit", "pread64", [fd, buf, size, off, 0, size, 1000], pid=pid)


def h2d(ts_us, dst, src, n, pid=100):
    return ev(ts_us, "api_enter", "cuMemcpy", [dst, src, n, 1], pid=pid)


def test_intervals():
    s = Intervals()
    s.add(0, 10)
    s.add(20, 30)
    s.add(5, 22)
    assert s.items() == [(0, 30)] and s.total() == 30
    s.remove(10, 12)
    assert s.items() == [(0, 10), (12, 30)]
    assert s.gaps(0, 40) == [(10, 12), (30, 40)] and s.overlap(8, 14) == 4


@pytest.mark.parametrize("again_us", [40, 60_000])
def test_a_buffer_copied_twice_adds_no_bytes_and_steals_no_other_read(again_us):
    """Read A into B, copy B; read C into D (another file), copy B again: A's buffer again (to a
    second GPU), or C's bytes the CPU put in B since (a pool that handed B out again: pyarrow, see
    test_trace_loaders.py) — the trace cannot tell. The second copy adds nothing to A and takes no
    bytes at its time; C, never copied otherwise, ends DRAM_BOUNCE with low confidence, its line
    naming both. The same 60 ms later, the classifier having advanced in between (every 20 ms of
    event time or 512 events): its queue had dropped A's read, taken, so the second copy once found
    nothing at B's address and took C's bytes as a staged copy (medium). A taken read stays findable
    by its buffer for RETAIN_NS after the copy that took it."""
    s = [
        ev(0, "open", "openat", [7], path="/data/a.bin"),
        ev(1, "open", "openat", [8], path="/data/c.bin"),
        read(10, 7, 0x7F1000000000, 4 * MiB, 0),
        h2d(20, 0x7E0000000000, 0x7F1000000000, 4 * MiB),
        read(30, 8, 0x7F2000000000, 4 * MiB, 0),
    ]
    if again_us > 20_000:
        s.append(ev(again_us - 20_000, "fd", "lseek", [8, 0]))  # (anything: the classifier advances)
    s.append(h2d(again_us, 0x7E1000000000, 0x7F1000000000, 4 * MiB))
    vs = {v["path"]: v for v in classify(s)}
    assert (vs["/data/a.bin"]["route"], vs["/data/a.bin"]["confidence"]) == (Route.DRAM_BOUNCE, "high")
    assert "taken by" not in " ".join(vs["/data/a.bin"]["evidence"])  # (one copy's bytes: the second adds none)
    c = vs["/data/c.bin"]
    assert (c["route"], c["confidence"]) == (Route.DRAM_BOUNCE, "low")
    assert "the same bytes again (to a second GPU)" in c["evidence"][-1] and "a reused buffer" in c["evidence"][-1]


def test_a_read_never_copied_stays_host_when_no_taken_buffer_was_copied_again():
    """The same without the second copy, or with it before C's read: C is host I/O."""
    base = [
        ev(0, "open", "openat", [7], path="/data/a.bin"),
        ev(1, "open", "openat", [8], path="/data/c.bin"),
        read(10, 7, 0x7F1000000000, 4 * MiB, 0),
        h2d(20, 0x7E0000000000, 0x7F1000000000, 4 * MiB),
    ]
    for tail in (
        [read(30, 8, 0x7F2000000000, 4 * MiB, 0)],
        [h2d(25, 0x7E1000000000, 0x7F1000000000, 4 * MiB), read(30, 8, 0x7F2000000000, 4 * MiB, 0)],
    ):
        vs = {v["path"]: v for v in classify(base + tail)}
        assert (vs["/data/c.bin"]["route"], vs["/data/c.bin"]["confidence"]) == (Route.HOST, "medium")


def test_readahead_belongs_to_the_read_that_follows():
    """fadvise(WILLNEED) fills pages, then a pread of that range: one I/O, not two (pyarrow's
    parquet reader; the old classifier counted such a file 125 %)."""
    s = [
        ev(0, "open", "openat", [7, 0, 0, 1, 77], path="/data/t.parquet"),
        ev(10, "pages", "page_cache_fill", [1, 77, 0, 512]),  # 2 MiB of readahead, no mapping
        read(50, 7, 0x7F1000000000, 2 * MiB, 0),
        h2d(900_000, 0x7E0000000000, 0x7F3000000000, 8 * MiB),
    ]
    vs = classify(s)
    assert [(v["api"], v["size"], v["route"]) for v in vs] == [("pread64", 2 * MiB, Route.DRAM_BOUNCE)]
    # no read follows: the fills are reported on their own, as host I/O (nothing took them)
    vs = classify(s[:2])
    assert [(v["api"], v["size"], v["route"]) for v in vs] == [("mmap", 2 * MiB, Route.HOST)]
    assert "no read or mapping" in vs[0]["evidence"][0]


def test_only_a_data_files_fills_make_a_process_keep_what_it_read():
    """The probe sends every page a process's mapping faults in for 200 ms after it maps a file
    (probes/cufile_trace.c: before the reader knows the file's inode), so a CUDA program started
    cold sends its libraries' pages. Those runs are dropped unnamed; they used to mark the process
    as one whose fills come, and from then on every read of it kept a read cover and every bounce
    pair it made stayed in the data-flow model (on the H100 a fifth of each DRAM_BOUNCE verdict's
    CPU, for the process's whole life). A fill of a data file does mark it, and then the reads'
    ranges are kept (test_readahead_belongs_to_the_read_that_follows: the fills they absorb)."""
    from gdsdiag.trace.model.classify import Classifier

    clf = Classifier()
    start = [
        ev(0, "open", "openat", [7, 0, 0, 1, 77], path="/data/t.bin"),
        ev(5, "pages", "page_cache_fill", [1, 4242, 0, 16]),  # (a library's pages: an inode never opened)
        ev(6, "pages", "page_cache_fill", [1, 4242, 16, 16]),
        read(50, 7, 0x7F1000000000, 1 * MiB, 0),
        h2d(60, 0x7E0000000000, 0x7F1000000000, 1 * MiB),
    ]
    for e in start:
        clf.feed(e)
    clf.advance(100_000)
    assert 100 not in clf.flow.fill_pids and not clf.flow.read_cover
    for e in (ev(200, "pages", "page_cache_fill", [1, 77, 4096, 16]), read(300, 7, 0x7F1000000000, 1 * MiB, MiB)):
        clf.feed(e)
    assert 100 in clf.flow.fill_pids and clf.flow.read_cover[(100, "/data/t.bin")].items() == [(MiB, 2 * MiB)]


def test_warm_mapped_file_is_a_page_cache_hit_with_its_bytes():
    """A mapped file whose pages were cached: no fill at all, and a copy from the mapping."""
    s = [
        ev(0, "open", "openat", [7, 0, 0, 1, 77], path="/m/w.safetensors"),
        ev(1, "fd", "mmap", [7, 0x7F4000000000, 16 * MiB, 0]),
        h2d(100, 0x7E0000000000, 0x7F4000001000, 8 * MiB),
    ]
    (v,) = classify(s)
    assert (v["api"], v["offset"], v["size"], v["route"], v["subtype"], v["confidence"]) == (
        "mmap",
        0x1000,
        8 * MiB,
        Route.DRAM_BOUNCE,
        "page-cache",
        "high",
    )
    assert "page cache, no device I/O" in v["evidence"]


def test_workers_read_the_main_process_copies():
    """A forked worker reads; its parent maps a descriptor it never opened (the shared memory the
    worker passes) and copies: one job, medium, with the link named."""
    s = [
        ev(0, "proc", "adopt", [1], pid=100),
        ev(1, "proc", "fork", [100, 200], pid=100),
        ev(2, "open", "openat", [5], pid=200, path="/data/s0.bin"),
        read(10, 5, 0x7F1000000000, 2 * MiB, 0, pid=200),
        ev(20, "fd", "mmap", [34, 0x7F5000000000, 2 * MiB, 0], pid=100),
        h2d(30, 0x7E0000000000, 0x7F6000000000, 2 * MiB, pid=100),
    ]
    (v,) = classify(s)
    # (a recording without content checks: inferred from order, low)
    assert (v["pid"], v["route"], v["confidence"]) == (200, Route.DRAM_BOUNCE, "low")
    assert "another process of the same traced tree" in v["evidence"][1]
    assert "a descriptor it never opened" in v["evidence"][1]
    # a process outside the tree copying is no evidence
    other = [e for e in s if not (e.kind == "proc" and e.name == "fork")]
    (v,) = classify(other)
    assert v["route"] == Route.HOST


def test_system_files_are_never_staged_but_a_copy_of_their_buffer_counts():
    assert not staged_ok("/usr/lib/ssl/openssl.cnf") and not staged_ok("/x/model/tokenizer.json")
    assert staged_ok("/data/shard-00001.safetensors") and staged_ok("/home/u/.cache/hf/model.bin")
    s = [
        ev(0, "open", "openat", [7], path="/usr/share/big.dat"),
        read(10, 7, 0x7F1000000000, 4 * MiB, 0),
    ]
    assert [v["route"] for v in classify(s + [h2d(20, 0x7E0000000000, 0x7F9000000000, 4 * MiB)])] == [Route.HOST]
    assert [v["route"] for v in classify(s + [h2d(20, 0x7E0000000000, 0x7F1000000000, 4 * MiB)])] == [Route.DRAM_BOUNCE]


def test_a_host_tool_in_the_tree_never_feeds_another_process_copy():
    """`sh -c 'cp … ; python load.py'`: the cp (exec'd, no CUDA library opened) reads, and writes what
    it read to another file, while the Python process copies to the GPU host memory no traced read
    explains: cp's bytes stay HOST (a host tool that writes its bytes to a file is never DRAM_BOUNCE).
    A reader without CUDA that writes no file may have handed its bytes over by shared memory or a
    pipe (held-out shm-handoff): UNKNOWN."""
    s = [
        ev(0, "proc", "adopt", [1], pid=100),
        ev(1, "proc", "fork", [100, 300], pid=100),
        ev(2, "proc", "exec", [], pid=300, path="/usr/bin/cp", comm="cp"),
        ev(3, "open", "openat", [5], pid=300, path="/data/big.bin"),
        ev(4, "open", "openat", [6], pid=300, path="/data/big.copy"),
        read(10, 5, 0x7F1000000000, 2 * MiB, 0, pid=300),
        ev(20, "sys_exit", "pwrite64", [6, 0x7F1000000000, 2 * MiB, 0, 0, 2 * MiB, 900], pid=300, comm="cp"),
        h2d(30, 0x7E0000000000, 0x7F6000000000, 2 * MiB, pid=100),
    ]
    vs = classify(s)
    assert sorted((v["pid"], v["op"], v["route"]) for v in vs) == [
        (300, "read", Route.HOST),
        (300, "write", Route.HOST),
    ]
    no_write = [e for e in s if e.name != "pwrite64"]
    (v,) = classify(no_write)
    assert (v["pid"], v["route"], v["confidence"]) == (300, Route.UNKNOWN, "low")
    # the same child without the exec (a forked worker of a CUDA process) does feed it
    (v,) = classify([e for e in no_write if e.name != "exec"])
    assert (v["pid"], v["route"]) == (300, Route.DRAM_BOUNCE)


def test_reads_a_direct_copy_took_are_not_kept():
    """A loader whose every copy is of its read's own buffer never makes a staged copy: the reads
    it made must still leave the model's queues (they were all kept, ~0.6 KB each, before)."""
    from gdsdiag.trace.model.classify import Classifier

    c = Classifier(None, 3)
    c.feed(ev(0, "open", "openat", [5, 0, 0, 1, 1, -100, 1], path="/data/w.bin"))
    for i in range(20_000):
        c.feed(read(10 + 3 * i, 5, 0x10000, 4096, i * 4096))
        c.feed(h2d(11 + 3 * i, 0x9000000 + i * 4096, 0x10000, 4096))
    waiting = sum(len(q) for q in c.flow.stageable.values()) + sum(len(q) for q in c.flow.by_pid.values())
    assert waiting < 1100, waiting
    c.flush()
    assert {v["route"] for v in c.drain()} == {Route.DRAM_BOUNCE}


def _two_files(staged: bool) -> list[Event]:
    """One thread with CUDA up reads host.bin (checksummed on the host, never copied) and mix.bin a
    MiB at a time, interleaved, and copies each mix.bin MiB to the GPU: from the read's own buffer
    (direct), or from another buffer (staged: a decode or pinned staging buffer), as
    tests/workloads/loaders_heldout.py's `mixed` loader does on the GPU machine."""
    s = [
        ev(0, "open", "openat", [3], path="/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        ev(1, "open", "openat", [7], path="/data/host.bin"),
        ev(2, "open", "openat", [8], path="/data/mix.bin"),
    ]
    t = 1000.0
    for i in range(24):
        s.append(read(t, 7, 0x7F0000000000 + (i % 3) * MiB, MiB, i * MiB))
        s.append(read(t + 20, 8, 0x7F1000000000 + (i % 3) * MiB, MiB, i * MiB))
        src = 0x7E5000000000 if staged else 0x7F1000000000 + (i % 3) * MiB
        s.append(h2d(t + 40, 0x7D0000000000 + i * MiB, src, MiB))
        t += 60
    return s


def test_a_staged_copy_among_several_files_says_the_pairing_is_not_known():
    """Direct copies name their file: mix.bin DRAM_BOUNCE high, host.bin HOST. Staged ones cannot:
    'oldest file bytes first' would put half of host.bin on the GPU and half of mix.bin on the host,
    at medium. Every such line is low and says why (bytes of other files were waiting for the copy;
    HOST by elimination for the reads passed over), the copies' 24 MiB stay whole, and the file
    summary says which file's bytes reached the GPU is not known for certain."""
    direct = classify(_two_files(staged=False))
    assert {(v["path"], v["route"], v["confidence"]) for v in direct} == {
        ("/data/host.bin", Route.HOST, "medium"),
        ("/data/mix.bin", Route.DRAM_BOUNCE, "high"),
    }
    from gdsdiag.trace.model.classify import Classifier

    c = Classifier()
    for e in _two_files(staged=True):
        c.feed(e)
    c.flush()
    staged = c.drain()
    assert len(staged) == 48 and {v["confidence"] for v in staged} == {"low"}
    assert sum(v["size"] for v in staged if v["route"] == Route.DRAM_BOUNCE) == 24 * MiB
    for v in staged:
        note = v["evidence"][-1]
        if v["route"] == Route.DRAM_BOUNCE:
            other = "host.bin" if v["path"].endswith("mix.bin") else "mix.bin"
            assert "which file's bytes it took is not known" in note and other in note
        else:
            assert note.startswith("HOST by elimination")
    files = {f["path"]: f for f in c.file_summary()}
    assert all("not known for certain" in files[p]["why"] for p in ("/data/host.bin", "/data/mix.bin"))


def test_a_staged_copy_of_one_files_bytes_keeps_its_confidence():
    """One file waiting: nothing to choose between, so no note and no lower confidence."""
    s = [ev(0, "open", "openat", [8], path="/data/mix.bin")]
    s += [read(10 + 30 * i, 8, 0x7F1000000000, MiB, i * MiB) for i in range(4)]
    s += [h2d(200, 0x7D0000000000, 0x7E5000000000, 4 * MiB)]
    vs = classify(s)
    assert len(vs) == 4 and {v["route"] for v in vs} == {Route.DRAM_BOUNCE}
    # (no content checks here: inferred from order, low, but no note of other files)
    assert {v["confidence"] for v in vs} == {"low"}
    assert not any("not known" in x for v in vs for x in v["evidence"])


def test_one_device_to_host_copy_carries_one_staged_write():
    """A 1 MiB copy from the GPU into a staging buffer, then 20 writes of 1 MiB from other buffers:
    the copy's bytes can be in one of them (the nearest), not in all 20 (they were DRAM_BOUNCE at
    medium, 19 MiB of host data put on the GPU's account)."""
    s = [
        ev(0, "open", "openat", [3], path="/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        ev(1, "open", "openat", [7], path="/data/out.bin"),
        ev(1000, "api_enter", "cuMemcpy", [0x7E5000000000, 0x7D0000000000, MiB, 2]),
    ]
    s += [
        ev(1010 + 10 * i, "sys_exit", "pwrite64", [7, 0x7F0000000000 + (i % 2) * MiB, MiB, i * MiB, 0, MiB, 9])
        for i in range(20)
    ]
    vs = [v for v in classify(s) if v["path"] == "/data/out.bin"]
    assert len(vs) == 20 and sum(v["route"] == Route.DRAM_BOUNCE for v in vs) == 1
    (b,) = [v for v in vs if v["route"] == Route.DRAM_BOUNCE]
    assert b["offset"] == 0 and "staged" in b["evidence"][1]
    # a write from the copy's own buffer is seen, not inferred: every such write counts
    s2 = s[:3] + [
        ev(1010 + 10 * i, "sys_exit", "pwrite64", [7, 0x7E5000000000, MiB, i * MiB, 0, MiB, 9]) for i in range(3)
    ]
    assert [(v["route"], v["confidence"]) for v in classify(s2) if v["path"] == "/data/out.bin"] == [
        (Route.DRAM_BOUNCE, "high")
    ] * 3


def test_writes_after_a_larger_copy_to_the_host_are_not_called_host_for_sure():
    """A 4 MiB copy from the GPU into one host buffer, then four 1 MiB writes from another: only a copy
    of a write's own size is inferred to be its bytes, so these stay HOST, but at low confidence and
    naming the copy (it is the GPU's data brought to the host whole and written out in pieces, or not:
    the trace cannot tell). Without that copy they are HOST at medium, as before."""
    base = [
        ev(0, "open", "openat", [3], path="/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        ev(1, "open", "openat", [7], path="/data/ckpt.bin"),
    ]
    writes = [ev(2000 + 10 * i, "sys_exit", "pwrite64", [7, 0x7F0000000000, MiB, i * MiB, 0, MiB, 9]) for i in range(4)]
    copy = ev(1000, "api_enter", "cuMemcpy", [0x7E5000000000, 0x7D0000000000, 4 * MiB, 2])
    vs = [v for v in classify(base + [copy] + writes) if v["path"] == "/data/ckpt.bin"]
    assert [(v["route"], v["confidence"]) for v in vs] == [(Route.HOST, "low")] * 4
    assert all("4194304 bytes" in v["evidence"][-1] and "may be part of it" in v["evidence"][-1] for v in vs)
    h2d_copy = ev(1000, "api_enter", "cuMemcpy", [0x7D0000000000, 0x7E5000000000, 4 * MiB, 1])
    for other in ([], [h2d_copy]):  # (no copy at all; a copy the other way)
        vs = [v for v in classify(base + other + writes) if v["path"] == "/data/ckpt.bin"]
        assert [(v["route"], v["confidence"]) for v in vs] == [(Route.HOST, "medium")] * 4


def test_the_staged_files_noted_stay_few_over_a_million_file_data_set():
    """Each staged copy notes the file whose bytes it took (a decode changes sizes, Source.with_file);
    a data set read a sample file at a time must not keep a note per file for the whole trace."""
    from gdsdiag.trace.model.dataflow import SWEEP_MIN, DataFlow, Source

    flow = DataFlow(lambda pid: 1)
    t = 0
    for i in range(3 * SWEEP_MIN):
        t += 20_000_000  # (50 samples a second: 30 s of them is 1,500 files)
        flow.add_read(Source(7, 1, t, f"/data/sample{i:07d}.bin", 0, 8192, 0x7F1000000000 + i * 8192, None))
        flow.copy(t + 1000, 7, 0x7E0000000000, 0x7D0000000000, 8192, 1)  # (staged: another buffer)
        flow.advance(t + 2000)
    assert len(flow.staged_files) <= 2 * SWEEP_MIN


def test_a_text_file_is_unknown_only_when_as_much_unexplained_memory_went_to_the_gpu():
    """A text file (dataflow.text_data: .txt, .json outside the system's and the interpreter's own
    files) is never paired with copies by order. Where a copy of host memory that no read explains
    follows its read with at least 1/16 of its bytes (a token corpus parsed into ids), the read is
    UNKNOWN; a tokenizer.json followed by the few bytes of a prompt's token ids stays HOST; so does one
    in site-packages."""

    def run(path: str, copied: int) -> dict:
        s = [
            ev(0, "open", "openat", [3], path="/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            ev(1, "open", "openat", [5], path=path),
            read(10, 5, 0x7F1000000000, 4 * MiB, 0),
            h2d(500, 0x7E0000000000, 0x7F6000000000, copied),
        ]
        (v,) = [v for v in classify(s) if v["path"] == path]
        return v

    v = run("/data/corpus.txt", 3 * MiB)
    assert (v["route"], v["confidence"]) == (Route.UNKNOWN, "low") and "a text file" in v["evidence"][-1]
    assert run("/models/llama/tokenizer.json", 8192)["route"] == Route.HOST
    assert run("/venv/lib/python3.12/site-packages/x/data.txt", 3 * MiB)["route"] == Route.HOST
    assert run("/data/corpus.txt", 255 * 1024)["route"] == Route.HOST  # (under 1/16 of 4 MiB)


def test_a_job_without_cuda_is_not_held_for_a_copy_that_cannot_come():
    """Issue 46: with --per-io a host program's first line came 30 s after its I/O (the job's wait
    for its first copy). A job none of whose processes opened a CUDA library is decided after
    NO_CUDA_WINDOW_NS; one with such a process still waits for its first copy."""
    from gdsdiag.trace.model.classify import Classifier
    from gdsdiag.trace.model.dataflow import FIRST_COPY_WINDOW_NS, NO_CUDA_WINDOW_NS

    for cuda in (False, True):
        c = Classifier()
        evs = [ev(0, "open", "openat", [5], path="/data/host.bin")]
        if cuda:
            evs.insert(0, ev(0, "open", "openat", [3], path="/usr/lib/x86_64-linux-gnu/libcudart.so.12"))
        evs.append(read(10, 5, 0x7F1000000000, MiB, 0))
        for e in evs:
            c.feed(e)
        c.advance(10_000 + NO_CUDA_WINDOW_NS + 100_000_000)
        got = [v for v in c.drain() if v["path"] == "/data/host.bin"]
        assert [v["route"] for v in got] == ([] if cuda else [Route.HOST])
        if cuda:
            c.advance(10_000 + FIRST_COPY_WINDOW_NS + 100_000_000)
            assert [v["route"] for v in c.drain() if v["path"] == "/data/host.bin"] == [Route.HOST]
