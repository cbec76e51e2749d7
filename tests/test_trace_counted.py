"""Host I/O counted in the kernel (gdsdiag/trace/model/counted.py): a version-3 recording's "counted"
events are named by the open that carries the same serial and summed into the HOST route, on
--replay as live. The recording here is the shape the probe writes (live checks: test_trace_live.py)."""

import json
import os
import subprocess
import sys

from gdsdiag.trace.model.counted import size_class

KiB = 1024


def _record(path, events):
    with open(path, "w") as f:
        f.write(json.dumps({"gdsdiag_trace_record": 3, "probes_attached": [], "probes_not_attached": []}) + "\n")
        for e in events:
            f.write(json.dumps(e) + "\n")


def test_size_classes_are_the_probes_log2_buckets():
    # bcc's bpf_log2l(v) is floor(log2(v)) + 1: 4096 -> 13, 8191 -> 13, 1 -> 1
    assert size_class(13) == "4 KiB-8 KiB" and size_class(17) == "64 KiB-128 KiB" and size_class(0) == "0"
    assert size_class(21) == "1 MiB-2 MiB"


def test_replay_sums_counted_host_io_into_the_summary_and_keeps_per_io_lines(tmp_path):
    rec = tmp_path / "rec.jsonl"
    data, lib = "/var/tmp/x/data.bin", "/var/tmp/x/other.bin"
    _record(
        rec,
        [
            [100, 7, 7, "proc", "exec", [], "app", "/usr/bin/app"],
            [200, 7, 7, "open", "openat", [3, 0, 0, 0, 0, -100, 4097], "", data],
            [210, 7, 7, "open", "openat", [4, 0, 0, 0, 0, -100, 8193], "", lib],
            # one I/O sent per I/O (e.g. while the map was full): a line, with its offset
            [300, 7, 7, "sys_exit", "pread64", [3, 1000, 65536, 0, 0, 65536, 5000], "app", None],
            # counters: 1000 preads of 4 KiB and 10 reads of 64 KiB of data.bin; small reads of other.bin
            [900, 7, 7, "counted", "pread64", [4097, 13, 1000, 4096000, 0, 3_000_000, 310, 900], "", None],
            [900, 7, 7, "counted", "read", [4097, 17, 10, 655360, 0, 100_000, 320, 890], "", None],
            [900, 7, 7, "counted", "read", [8193, 10, 5, 2500, 0, 1000, 330, 880], "", None],
        ],
    )
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    ios = [x for x in lines if x["type"] == "io"]
    summ = lines[-1]
    assert [(v["api"], v["path"], v["offset"], v["size"], v["route"]) for v in ios] == [
        ("pread64", data, 0, 65536, "HOST")
    ]
    rows = sorted((x["api"], x["path"], x["size_class"], x["count"], x["bytes"]) for x in summ["host_io_counted"])
    # the 512-byte reads are under the 4 KiB floor per-I/O reporting uses too: left out alike
    assert rows == [("pread64", data, "4 KiB-8 KiB", 1000, 4096000), ("read", data, "64 KiB-128 KiB", 10, 655360)]
    host = summ["routes"]["HOST"]
    assert host["count"] == 1011 and host["counted_in_kernel"] == 1010
    assert host["bytes"] == 65536 + 4096000 + 655360
    assert summ["ios"] == 1011 and summ["ios_counted_in_kernel"] == 1010
    assert {p["pid"]: p["ios"] for p in summ["processes"]} == {7: 1011}
    # the mean latency is per counter
    assert next(x for x in summ["host_io_counted"] if x["api"] == "pread64")["mean_latency_us"] == 3.0
    # --path keeps only counters of files under it
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json", "--path", "/elsewhere"],
        capture_output=True,
        text=True,
    )
    assert json.loads(r.stdout.splitlines()[-1])["host_io_counted"] == []


def test_a_read_after_counted_reads_starts_where_they_left_the_position(tmp_path):
    """read(2) at the file position: the bytes moved while counted come with the next per-I/O record
    (a4), so its offset is exact."""
    rec = tmp_path / "rec.jsonl"
    data = "/var/tmp/x/seq.bin"
    _record(
        rec,
        [
            [200, 7, 7, "open", "openat", [3, 0, 0, 0, 0, -100, 4097], "", data],
            [300, 7, 7, "sys_exit", "read", [3, 1000, 65536, -1, 3 * 65536, 65536, 5000], "app", None],
            [400, 7, 7, "sys_exit", "read", [3, 1000, 65536, -1, 0, 65536, 5000], "app", None],
        ],
    )
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json"], capture_output=True, text=True
    )
    ios = [json.loads(x) for x in r.stdout.splitlines() if '"type": "io"' in x]
    assert [(v["offset"], v["size"]) for v in ios] == [(3 * 65536, 65536), (4 * 65536, 65536)]


def test_exporter_route_counters_take_the_kernels_counters_too():
    """gdsdiag exporter --trace counts routes per verdict; host I/O counted in the kernel arrives as
    rows (validate.adapters.trace_window hands them over) and counts the same."""
    from gdsdiag.exporter.collect import TraceCounters

    c = TraceCounters()
    c.add_counted({"route": "HOST", "comm": "app", "op": "read", "count": 1000, "bytes": 4096000})
    c.add_counted({"route": "HOST", "comm": "app", "op": "read", "count": 10, "bytes": 655360})
    k = ("HOST", "app", "read", "", "", "")  # (no pod: the rows name no pid here)
    assert c.ios[k] == 1010 and c.bytes[k] == 4096000 + 655360


def _handoff(tmp_path, copy: bool, per_io: bool = False):
    """A process with CUDA (it opened libcuda) that forks a reader; the reader execs a program without
    CUDA (a spawned worker, `dd`) and reads a data file, 4 MiB at a time; then, if COPY, the first
    process copies 4 MiB of host memory no read of its own explains to the GPU (from shared memory or
    a pipe the reader filled: the trace does not see which). The reader's reads come counted in the
    kernel, or, PER_IO, one by one (--per-io)."""
    data = "/var/tmp/x/shards.bin"
    ev = [
        [100, 7, 7, "proc", "exec", [], "main", "/usr/bin/python3"],
        [150, 7, 7, "open", "openat", [3, 0, 0, 0, 0, -100, 0], "", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"],
        [200, 7, 7, "proc", "fork", [7, 8], "main", None],
        [300, 8, 8, "proc", "exec", [], "worker", "/usr/bin/python3"],
        [400, 8, 8, "open", "openat", [5, 0, 0, 0, 0, -100, 4097], "", data],
    ]
    if per_io:
        ev += [
            [
                1000 + k * 100_000,
                8,
                8,
                "sys_exit",
                "read",
                [5, 0x7F0000000000, 4 << 20, 0, 0, 4 << 20, 9000],
                "worker",
                None,
            ]
            for k in range(3)
        ]
    else:
        ev.append([600_000, 8, 8, "counted", "read", [4097, 23, 3, 12 << 20, 0, 30_000, 1000, 201_000], "", None])
    if copy:
        ev.append([500_000, 7, 7, "api_enter", "cuMemcpy", [0x7E0000000000, 0x7D0000000000, 4 << 20, 1], "main", None])
    _record(tmp_path / "rec.jsonl", ev)
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(tmp_path / "rec.jsonl"), "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    return [x for x in lines if x["type"] == "io"], lines[-1], data


def test_counted_reads_of_a_process_without_cuda_are_unknown_when_its_tree_copied_unexplained_memory(tmp_path):
    """Held-out shm-handoff and pipe-stream (H100, 2026-12-06): a worker without CUDA read the file,
    the process with CUDA copied its bytes from shared memory or a pipe. The worker's reads, counted in
    the kernel, were HOST ("no CUDA copy can make them DRAM_BOUNCE"): a confident wrong answer. With a
    copy of the tree that no traced read explains after them, they are UNKNOWN and say why; without
    one they stay HOST."""
    _, summ, data = _handoff(tmp_path, copy=True)
    (row,) = [r for r in summ["host_io_counted"] if r["path"] == data]
    assert row["route"] == "UNKNOWN" and "in its traced tree main/7 copied" in row["why"]
    assert "4194304 bytes from memory no traced read explains" in row["why"]
    assert summ["routes"]["UNKNOWN"]["counted_in_kernel"] == 3 and "HOST" not in summ["routes"]

    _, summ, data = _handoff(tmp_path, copy=False)
    (row,) = [r for r in summ["host_io_counted"] if r["path"] == data]
    assert row["route"] == "HOST" and "why" not in row
    assert summ["routes"]["HOST"]["counted_in_kernel"] == 3


def test_per_io_reads_of_a_process_without_cuda_are_unknown_the_same_way(tmp_path):
    """The same hand-off traced with --per-io: each read a line, UNKNOWN (low) where the counted rows
    are, HOST (medium) without the copy."""
    ios, _, data = _handoff(tmp_path, copy=True, per_io=True)
    mine = [v for v in ios if v["path"] == data]
    assert len(mine) == 3 and {(v["route"], v["confidence"]) for v in mine} == {("UNKNOWN", "low")}
    assert all("shared memory or a pipe" in v["evidence"][-1] for v in mine)

    ios, _, data = _handoff(tmp_path, copy=False, per_io=True)
    mine = [v for v in ios if v["path"] == data]
    assert len(mine) == 3 and {(v["route"], v["confidence"]) for v in mine} == {("HOST", "medium")}


def test_reads_whose_records_the_ring_dropped_are_in_the_books_of_their_file_without_a_route(tmp_path):
    """Issue 43 goal 5: a counter flagged lost (args[8], the kernel's drop of a read of a process
    that may copy to a GPU) is UNKNOWN with no per-I/O detail, under its file, its tree and its
    process, and counted once in ios (as a lost I/O, not as host I/O counted)."""
    rec = tmp_path / "rec.jsonl"
    data = "/var/tmp/x/data.bin"
    _record(
        rec,
        [
            [100, 7, 7, "proc", "exec", [], "app", "/usr/bin/app"],
            [200, 7, 7, "open", "openat", [3, 0, 0, 0, 0, -100, 4097], "", data],
            [300, 7, 7, "sys_exit", "pread64", [3, 1000, 4096, 0, 0, 4096, 5000], "app", None],
            [900, 7, 7, "counted", "pread64", [4097, 13, 99, 99 * 4096, 0, 99_000, 310, 900, 1], "", None],
        ],
    )
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    summ = json.loads(r.stdout.splitlines()[-1])
    (row,) = summ["host_io_counted"]
    assert row["lost"] is True and row["route"] == "UNKNOWN" and "no per-I/O detail" in row["why"]
    assert summ["routes"]["UNKNOWN"]["lost_in_kernel"] == 99 and summ["routes"]["HOST"]["count"] == 1
    assert (summ["ios"], summ["ios_counted_in_kernel"], summ["ios_lost_in_kernel"]) == (100, 0, 99)
    assert summ["bytes_lost_in_kernel"] == 99 * 4096
    (f,) = summ["files"]
    assert (f["ios"], f["bytes"]) == (100, 100 * 4096)
    assert f["routes"] == {"HOST": 4096, "UNKNOWN": 99 * 4096}
    assert f["lost_in_kernel"] == {"ios": 99, "bytes": 99 * 4096} and "99 I/Os (396 KiB) have no per-I/O" in f["why"]
    assert summ["trees"][0]["routes"] == f["routes"]
    assert {p["pid"]: p["ios"] for p in summ["processes"]} == {7: 100}
    assert [(x["pid"], x["ios"], x["in_files"]) for x in summ["lost_by_process"]] == [(7, 99, 99)]


def test_counted_only_io_says_its_latency_is_unknown_in_one_size_notation(tmp_path):
    # issue 46 goal 4: a route whose I/Os were all counted in the kernel has no latency to show
    # ("p50 - µs, p99 - µs" was printed), and its size classes use the one notation ("4 KiB", not "4KiB")
    rec = tmp_path / "rec.jsonl"
    data = "/var/tmp/x/data.bin"
    _record(
        rec,
        [
            [100, 7, 7, "proc", "exec", [], "app", "/usr/bin/app"],
            [200, 7, 7, "open", "openat", [3, 0, 0, 0, 0, -100, 4097], "", data],
            [900, 7, 7, "counted", "pread64", [4097, 21, 8, 8 << 20, 0, 3_000_000, 310, 900], "", None],
        ],
    )
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert "HOST: 8 I/Os, 8 MiB, latency unknown (8 counted in the kernel)" in r.stdout, r.stdout
    assert "8 x 1 MiB-2 MiB = 8 MiB" in r.stdout and "p50 - " not in r.stdout and "MiB-2MiB" not in r.stdout
