"""Host I/O counted in the kernel (gdsdiag/trace/counted.py): a version-3 recording's "counted"
events are named by the open that carries the same serial and summed into the HOST route, on
--replay as live. The recording here is the shape the probe writes (live checks: test_trace_live.py)."""

import json
import subprocess
import sys

from gdsdiag.trace.counted import size_class

KiB = 1024


def _record(path, events):
    with open(path, "w") as f:
        f.write(json.dumps({"gdsdiag_trace_record": 3, "probes_attached": [], "probes_not_attached": []}) + "\n")
        for e in events:
            f.write(json.dumps(e) + "\n")


def test_size_classes_are_the_probes_log2_buckets():
    # bcc's bpf_log2l(v) is floor(log2(v)) + 1: 4096 -> 13, 8191 -> 13, 1 -> 1
    assert size_class(13) == "4KiB-8KiB" and size_class(17) == "64KiB-128KiB" and size_class(0) == "0"
    assert size_class(21) == "1MiB-2MiB"


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
    assert rows == [("pread64", data, "4KiB-8KiB", 1000, 4096000), ("read", data, "64KiB-128KiB", 10, 655360)]
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
    assert c.ios[("HOST", "app", "read")] == 1010 and c.bytes[("HOST", "app", "read")] == 4096000 + 655360
