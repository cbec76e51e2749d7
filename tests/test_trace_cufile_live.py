"""gdsdiag trace on real cuFile calls (libcufile's compat path: no nvidia-fs), the probes folding each
call's own pread64/pwrite64 and cufio_px_* USDT hits into its exit record (record version 4).

The workload (gdsdiag's own cffi bindings over the real libcufile) prints its ground truth: every
call's direction, offset, size and result. The trace must give one COMPAT verdict per call with the
syscall evidence (and the USDT evidence where the library has the probes), whether the calling thread
or libcufile's workers did the syscalls, and the recording must show the fold at work. Needs root,
bcc, CuPy, libcufile and a GPU: skipped with the reason elsewhere (run on the GPU machine)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from conftest import LIVE_MARKS

from gdsdiag.trace.model.events import RECORD_VERSION
from gdsdiag.trace.recording import read_record

MiB = 1 << 20
pytestmark = LIVE_MARKS

WORKLOAD = r"""
import json, os, sys
import cupy as cp
import gdsdiag.cufile as cf
path, out = sys.argv[1], []
dev = cp.empty(32 << 20, dtype=cp.uint8)
with cf.Driver(), cf.FileHandle(path, "r+") as fh, cf.BufferRegistration(dev):
    plan = [("read", i * 4096, 4096) for i in range(300)]
    plan += [("read", i << 20, 1 << 20) for i in range(20)]
    plan += [("read", 0, 32 << 20), ("read", 32 << 20, 32 << 20)]  # (libcufile splits these)
    plan += [("write", (64 << 20) + i * 65536, 65536) for i in range(50)]
    for op, off, size in plan:
        ret = (fh.read if op == "read" else fh.write)(dev, size, off)
        out.append([op, off, size, ret])
print(json.dumps(out))
"""


def _gpu_reason():
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # (no CuPy, no driver, no GPU)
        return f"needs CuPy and a GPU: {type(e).__name__}: {e}"
    try:
        from gdsdiag.cufile import load

        load()
    except Exception as e:
        return f"needs libcufile: {type(e).__name__}: {e}"
    return None


@pytest.fixture
def datadir():
    d = os.path.realpath(tempfile.mkdtemp(prefix="gdsdiag-trace-cufile-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _data_file(datadir: str, mib: int) -> str:
    """A file of MIB random MiB in DATADIR for the cuFile calls to read; the
    test skips, with the reason, where there is no GPU, CuPy or libcufile."""
    why = _gpu_reason()
    if why:
        pytest.skip(why)
    data = os.path.join(datadir, "f.dat")
    with open(data, "wb") as f:
        f.write(os.urandom(mib * MiB))
    return data


def test_compat_calls_fold_their_own_evidence_and_keep_their_verdicts(datadir, tmp_path):
    data = _data_file(datadir, 72)
    wl = tmp_path / "wl.py"
    wl.write_text(WORKLOAD)
    rec = tmp_path / "r.jsonl.gz"
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "--record", str(rec), "--"]
        + [sys.executable, str(wl), data],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith(("{", "["))]
    truth = next(x for x in lines if isinstance(x, list))  # (the workload's own line)
    ios = [x for x in lines if isinstance(x, dict) and x.get("type") == "io" and x.get("api", "").startswith("cuFile")]
    assert len(truth) == 372 and all(ret == size for _, _, size, ret in truth), truth[:5]
    got = sorted((v["op"], v["offset"], v["size"], v["ret"]) for v in ios)
    assert got == sorted(tuple(t) for t in truth)
    assert {v["route"] for v in ios} == {"COMPAT"}, [v for v in ios if v["route"] != "COMPAT"][:3]
    header, events = read_record(str(rec))
    # (the probes attached, as the recording lists them: libcufile 1.15 has the POSIX USDT probes)
    usdt = any("cufio_px_read" in x for x in header.get("probes_attached", []))
    for v in ios:
        sysname = "pread64" if v["op"] == "read" else "pwrite64"
        assert any(x.startswith(f"{sysname} fd ") for x in v["evidence"]), v
        if usdt and v["size"] < 8 * MiB:
            assert any(x.startswith("usdt cufio_core:cufio_px_") for x in v["evidence"]), v
    assert header["gdsdiag_trace_record"] == RECORD_VERSION == 5
    exits = [e for e in events if e.kind == "api_exit" and e.name in ("cuFileRead", "cuFileWrite")]
    folded = [e for e in exits if len(e.args) > 6 and e.args[1] > 0]
    # the 4 KiB .. 1 MiB calls: libcufile's pread64/pwrite64 on the calling thread, folded
    assert len(exits) == 372 and len(folded) >= 370, (len(exits), len(folded))
    own = {(e.pid, e.tid) for e in exits}
    data_fds = {(e.pid, e.args[0]) for e in events if e.kind == "open" and e.path == data}
    inside = [
        e
        for e in events
        if e.kind == "sys_exit"
        and e.name in ("pread64", "pwrite64")
        and (e.pid, e.tid) in own
        and (e.pid, e.args[0]) in data_fds
    ]
    usdt_folded = [e for e in folded if e.args[4] > 0]
    print(
        f"calls {len(exits)}, folded {len(folded)} (USDT hits in {len(usdt_folded)}), calling-thread syscall "
        f"records left {len(inside)}, events {len(events)}, POSIX USDT probes attached: {usdt}"
    )
    if usdt:
        assert len(usdt_folded) >= 370, len(usdt_folded)
    assert data_fds and len(inside) <= 16, len(inside)  # (what the calling thread did outside the fold's rules)


STREAM = r"""
import json, os, sys, time
import cupy as cp
import gdsdiag.cufile as cf
path, calls, truth = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dev = cp.empty(4096, dtype=cp.uint8)
span = os.path.getsize(path) // 4096
ok = 0
with cf.Driver(), cf.FileHandle(path, "r") as fh, cf.BufferRegistration(dev):
    open(truth + ".go", "w").close()  # (the calls start now)
    for i in range(calls):
        ok += fh.read(dev, 4096, (i % span) * 4096) == 4096
with open(truth, "w") as f:
    f.write(json.dumps({"calls": calls, "ok": ok}))
"""


def test_cufile_calls_stay_counted_exactly_when_the_ring_overflows(datadir, tmp_path):
    # The tracer is stopped (SIGSTOP) for 8 s while one thread makes 4 KiB compat cuFileRead calls
    # (~20k a second): the 16 MiB events ring fills and the kernel drops records, among them calls'
    # exits that carry their own pread64 (the fold). Every call must still count exactly once: a
    # verdict, a read lost in the kernel (with its bytes), or one counted without a route — never
    # missing (a dropped exit was an event only, its I/O gone) and never twice (the call held in flight
    # for a dropped exit was decided again at the end).
    import signal
    import time

    data = _data_file(datadir, 64)
    wl, truth = tmp_path / "wl.py", tmp_path / "truth.json"
    wl.write_text(STREAM)
    calls = 300_000
    p = subprocess.Popen(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "--"]
        + [sys.executable, str(wl), data, str(calls), str(truth)],
        stdout=open(tmp_path / "out.jsonl", "w"),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        t = time.monotonic()
        while not os.path.exists(str(truth) + ".go") and time.monotonic() - t < 120 and p.poll() is None:
            time.sleep(0.05)
        time.sleep(1.0)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(8.0)
        os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
    assert p.returncode == 0, err[-3000:]
    got = json.loads(truth.read_text())
    assert got["ok"] == calls, got
    lines = [json.loads(x) for x in open(tmp_path / "out.jsonl") if x.startswith("{")]
    s = lines[-1]
    verdicts = [x for x in lines if x.get("type") == "io" and x.get("api") == "cuFileRead"]
    lost = [r for r in s["lost_by_process"] if r["ios"]]
    unrouted = sum(r["ios"] for r in s["unclassified_by_process"])
    # (the library's and interpreter's own reads of other files, e.g. /etc/cufile.json: their verdicts)
    other = [x for x in lines if x.get("type") == "io" and x.get("api") != "cuFileRead"]
    print(
        f"calls {calls}, verdicts {len(verdicts)}, lost in the kernel {s['ios_lost_in_kernel']} I/Os "
        f"({s['lost_events']} events), counted without a route {unrouted}, summary ios {s['ios']}, "
        f"other files' I/Os {len(other)} ({sorted({x['path'] for x in other})[:5]})"
    )
    assert s["lost_events"] > 0, "the ring never overflowed: the test did not test"
    assert {v["route"] for v in verdicts} == {"COMPAT"}
    assert len(verdicts) + s["ios_lost_in_kernel"] + unrouted == calls, s
    assert s["ios"] == calls + len(other), s
    assert all(r["bytes"] == r["ios"] * 4096 for r in lost), lost
