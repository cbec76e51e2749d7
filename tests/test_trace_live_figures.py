"""The live figures of gdsdiag trace are true (issue 46 goal 3), measured against the program's own
numbers on this machine's kernel:

- ``--interval 1`` on an io_uring fio run: no interval's GB/s is above what fio itself logged for
  its best second (fio's bandwidth log, ``--write_bw_log --log_avg_msec=1000``), the last, short
  interval included (the issue saw 5.0 and 12.3 GB/s there beside fio's 1.51), and the intervals'
  bytes add up to fio's io_bytes;
- ``--per-io`` on a host program (no CUDA: no copy can come): its first verdict line reaches the
  reader at most 1 s after the I/O (the line's ``ts`` is the kernel's CLOCK_MONOTONIC, read here with
  time.monotonic_ns), while the program still runs (it was 30.5 s, then at the program's exit).

A loaded shared machine can delay a process by more than the bound: a bound is called broken only
when two runs both miss it (as tests/test_hostile_exporter_loop.py does for the exporter's stop)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import GDSDIAG, live

pytestmark = [pytest.mark.slow]


@pytest.fixture
def datadir():
    # /var/tmp: a real disk (O_DIRECT works there; tmpfs refuses it)
    d = os.path.realpath(__import__("tempfile").mkdtemp(prefix="gdsdiag-figures-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _fio_under_interval(datadir: str, k: int) -> tuple[list[dict], dict, list[float]]:
    data = os.path.join(datadir, "data.bin")
    if not os.path.exists(data):  # written by fio, as a user's fio job lays out its file
        subprocess.run(
            ["fio", "--name=mk", f"--filename={data}", "--size=256M", "--rw=write", "--bs=1M", "--output=/dev/null"],
            check=True,
            timeout=300,
        )
    out, fio_json = os.path.join(datadir, f"trace{k}.jsonl"), os.path.join(datadir, f"fio{k}.json")
    bw = os.path.join(datadir, f"bw{k}")
    p = subprocess.run(
        [
            *GDSDIAG,
            "trace",
            "--interval",
            "1",
            "--per-io",  # every I/O a verdict of its own, decided in user space (where verdicts were held)
            "--json",
            "-o",
            out,
            "--",
            "fio",
            "--name=r",
            f"--filename={data}",
            "--rw=read",
            "--bs=1M",
            "--direct=1",
            "--ioengine=io_uring",
            "--iodepth=8",
            "--time_based",
            "--runtime=4",
            f"--write_bw_log={bw}",
            "--log_avg_msec=1000",
            "--output-format=json",
            f"--output={fio_json}",
        ],
        cwd=datadir,  # fio run in its data directory, as a user runs a job file
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    with open(out) as f:
        lines = [json.loads(x) for x in f]
    with open(fio_json) as f:
        fio = json.load(f)["jobs"][0]["read"]
    with open(f"{bw}_bw.1.log") as f:  # msec, KiB/s, ...: one line a second
        seconds = [int(ln.split(",")[1]) * 1024 / 1e9 for ln in f if ln.strip()]
    return lines, fio, seconds


@live
@pytest.mark.skipif(shutil.which("fio") is None, reason="no fio (.ci/run installs it)")
def test_an_intervals_gbps_is_never_above_what_fio_did(datadir):
    misses = []
    for k in range(2):
        lines, fio, seconds = _fio_under_interval(datadir, k)
        intervals = [x for x in lines if x.get("type") == "interval"]
        summary = lines[-1]
        assert summary.get("type") == "summary" and intervals, lines[-3:]
        (traced,) = [f["bytes"] for f in summary["files"] if f["path"].endswith("/data.bin")]
        assert traced == fio["io_bytes"], (traced, fio["io_bytes"])  # every byte fio read, once
        host = [(x["interval_s"], x["routes"]["HOST"]) for x in intervals if "HOST" in x["routes"]]
        # the intervals hold fio's reads and what it wrote at its end: its JSON and its bandwidth log
        others = sum(os.path.getsize(os.path.join(datadir, f)) for f in os.listdir(datadir) if f.endswith(f"{k}.json"))
        others += sum(os.path.getsize(os.path.join(datadir, f)) for f in os.listdir(datadir) if f.startswith(f"bw{k}"))
        assert traced <= sum(h["bytes"] for _, h in host) <= traced + others, (host, traced, others)
        # fio's best second, and 5 % for the two clocks' windows not lining up
        best = max(seconds + [fio["bw_bytes"] / 1e9]) * 1.05
        over = [(s, h["gbps"]) for s, h in host if h["gbps"] > best]
        if not over:
            return
        misses.append((over, seconds, fio["bw_bytes"] / 1e9))
    pytest.fail(f"intervals above what fio did, in both runs: {misses}")


PROG = (
    "import os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
    "os.pread(fd, 1 << 20, 0)\n"
    "time.sleep(4)\n"  # still running well after the bound: a line at the exit would miss it
)


def _first_line_after(path: str) -> float | None:
    p = subprocess.Popen(
        [*GDSDIAG, "trace", "--json", "--per-io", "--", sys.executable, "-c", PROG, path],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    first = None
    assert p.stdout is not None
    for line in p.stdout:
        now = time.monotonic_ns()
        d = json.loads(line)
        if first is None and d.get("type") != "summary" and d.get("path") == path:
            first = (now - d["ts"]) / 1e9
    assert p.wait(60) == 0
    return first


@live
def test_per_io_first_line_within_a_second_of_the_io(datadir):
    path = os.path.join(datadir, "small.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20))
    late = []
    for _ in range(2):
        first = _first_line_after(path)
        assert first is not None, "no verdict line for the read"
        if first <= 1.0:
            return
        late.append(round(first, 3))
    pytest.fail(f"--per-io's first line came {late} s after the read, in both runs (bound 1 s)")
