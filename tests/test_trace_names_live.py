"""Names users recognise, live on this kernel (issue 43 goal 3): a checkpoint writer that saves
through temporary names (os.replace, an O_TMPFILE linked through /proc/self/fd and by AT_EMPTY_PATH,
a directory renamed), and an io_uring program with registered files and buffers
(tests/workloads/uring_fixed.c, built here with the C compiler as test_trace_live.py builds
uring_rw.c). Each program prints what it did; the trace must name the same files, offsets and
buffers. Needs root, bcc and a kernel headers tree; skipped with the reason otherwise."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from conftest import LIVE_MARKS

HERE = os.path.dirname(os.path.abspath(__file__))
URING_FIXED_C = os.path.join(HERE, "workloads", "uring_fixed.c")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable  # not a pyenv shell shim
MiB = 1 << 20


def _prepend(d: str) -> str:
    """D first on the library path, what the environment had after it (the GPU machine's kit puts
    libbcc there)."""
    return d + (os.pathsep + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")


pytestmark = LIVE_MARKS

# (no CUDA: its writes are host I/O; the names are what is checked)
WRITER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_SYMLINK_FOLLOW, AT_EMPTY_PATH = -100, 0x400, 0x1000
d = sys.argv[1]
def link(fd, src, dst, flags):
    if libc.linkat(fd, src.encode(), AT_FDCWD, dst.encode(), flags) != 0:
        raise OSError(ctypes.get_errno(), "linkat")
with open(os.path.join(d, "model.safetensors.tmp"), "wb") as f:   # torch.save / safetensors: temp + replace
    f.write(b"m" * (4 << 20))
os.replace(os.path.join(d, "model.safetensors.tmp"), os.path.join(d, "model.safetensors"))
fd = os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o600)                # O_TMPFILE, linked through /proc
os.write(fd, b"a" * (2 << 20))
link(AT_FDCWD, f"/proc/self/fd/{fd}", os.path.join(d, "a.pt"), AT_SYMLINK_FOLLOW)
os.close(fd)
fd = os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o600)                # O_TMPFILE, linked by its descriptor
os.write(fd, b"b" * (1 << 20))
link(fd, "", os.path.join(d, "b.pt"), AT_EMPTY_PATH)
os.close(fd)
os.mkdir(os.path.join(d, "step.tmp"))                               # a directory written, then renamed
with open(os.path.join(d, "step.tmp", "shard-0"), "wb") as f:
    f.write(b"s" * (1 << 20))
os.rename(os.path.join(d, "step.tmp"), os.path.join(d, "step-100"))
print("saved", flush=True)
"""
FINAL = {"model.safetensors": 4 * MiB, "a.pt": 2 * MiB, "b.pt": MiB, "step-100/shard-0": MiB}


@pytest.fixture
def datadir():
    # /var/tmp: a real disk (O_TMPFILE needs a file system that has it; tmpfs does, but not every one)
    d = os.path.realpath(tempfile.mkdtemp(prefix="gdsdiag-names-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _trace(args, cmd, tmp_path):
    out = tmp_path / f"out-{len(list(tmp_path.iterdir()))}.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "-o", str(out), *args, "--", *cmd],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.path.dirname(HERE)},
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    return r.stdout, [x for x in lines if x["type"] == "io"], lines[-1]


def _rel(d, path):
    return os.path.relpath(path, d) if path and path.startswith(d + "/") else None


def test_a_writer_that_saves_through_temporary_names_is_reported_under_the_final_names(datadir, tmp_path):
    prog = tmp_path / "writer.py"
    prog.write_text(WRITER)
    # per I/O: every verdict and the per-file summary under the final name, the temporary one in the
    # evidence (the writes are decided after their 100 ms hold: the renames came before)
    rec = tmp_path / "rec.jsonl"
    stdout, ios, summ = _trace(["--per-io", "--record", str(rec)], [PY, str(prog), datadir], tmp_path)
    assert "saved" in stdout
    got: dict[str, int] = {}
    for v in ios:
        rel = _rel(datadir, v["path"])
        if rel is not None:
            got[rel] = got.get(rel, 0) + v["size"]
            assert v["evidence"][-1].startswith("written as ") and v["evidence"][-1].endswith(v["path"]), v
    assert got == FINAL
    files = {_rel(datadir, f["path"]): f for f in summ["files"]}
    assert {k: f["bytes"] for k, f in files.items() if k} == FINAL
    assert files["model.safetensors"]["renamed_from"] == [os.path.join(datadir, "model.safetensors.tmp")]
    assert files["a.pt"]["renamed_from"][0].startswith(os.path.join(datadir, "(unnamed O_TMPFILE"))
    assert files["step-100/shard-0"]["renamed_from"] == [os.path.join(datadir, "step.tmp", "shard-0")]
    # the recording replays to the same names
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.path.dirname(HERE)},
    )
    replayed = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert sorted(
        _rel(datadir, v["path"]) for v in replayed if v["type"] == "io" and _rel(datadir, v["path"])
    ) == sorted(_rel(datadir, v["path"]) for v in ios if _rel(datadir, v["path"]))
    # counted in the kernel (the default for a process without CUDA): the rows name the final files
    again = os.path.join(datadir, "again")
    os.mkdir(again)
    _, _, summ = _trace([], [PY, str(prog), again], tmp_path)
    rows: dict[str, int] = {}
    for row in summ["host_io_counted"]:
        rel = _rel(again, row["path"])
        if rel is not None:
            rows[rel] = rows.get(rel, 0) + row["bytes"]
            assert row["renamed_from"], row
    assert rows == FINAL
    files = {_rel(again, f["path"]): f for f in summ["files"] if _rel(again, f["path"])}
    assert {k: f["bytes"] for k, f in files.items()} == FINAL and all(f["renamed_from"] for f in files.values())


def test_io_uring_registered_files_and_buffers_resolve_to_paths_and_addresses(datadir, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build tests/workloads/uring_fixed.c")
    exe = str(tmp_path / "uring_fixed")
    subprocess.run([cc, "-O2", "-o", exe, URING_FIXED_C], check=True)
    f1, f2 = os.path.join(datadir, "u1.dat"), os.path.join(datadir, "u2.dat")
    stdout, ios, summ = _trace(["--per-io"], [exe, f1, f2], tmp_path)
    want = []
    for line in stdout.splitlines():  # "op <write|read> SIZE OFFSET RESULT BUFFER PATH"
        if line.startswith("op "):
            _, op, size, off, res, buf, path = line.split()
            assert int(res) == int(size), line
            want.append((op, path, int(off), int(size), int(buf, 16)))
    assert len(want) == 6
    got = [
        (v["op"], v["path"], v["offset"], v["size"], int(v["evidence"][0].split("host memory ")[1].split()[0], 16))
        for v in ios
        if v["api"] == "io_uring"
    ]
    assert sorted(got) == sorted(want), got
    fixed = [v["evidence"][0] for v in ios if v["api"] == "io_uring" and v["op"] == "read"]
    assert sum("in registered buffer #" in e for e in fixed) == 3
    assert sum("registered file #0" in e for e in fixed) == 3 and sum("registered file #1" in e for e in fixed) == 1
    assert {f["path"] for f in summ["files"]} >= {f1, f2}


THREADS = r"""
import os, sys, threading, time
def work(i):
    with open(os.path.join(sys.argv[1], f"t{i}.dat"), "wb") as f:
        f.write(b"t" * (1 << 20))
    time.sleep(0.3)                      # (alive when the reader looks: a thread gone by then is listed)
ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
[t.start() for t in ts]
[t.join() for t in ts]
for i in range(20):                      # threads of no time at all: gone before the reader looks
    t = threading.Thread(target=int)
    t.start()
    t.join()
if os.fork() == 0:
    os._exit(0)
os.wait()
print("pid", os.getpid(), flush=True)
"""


def test_threads_are_shown_under_their_process(datadir, tmp_path):
    prog = tmp_path / "threads.py"
    prog.write_text(THREADS)
    stdout, _, summ = _trace([], [PY, str(prog), datadir], tmp_path)
    main = int(stdout.split("pid ")[1].split()[0])
    procs = {p["pid"]: p for p in summ["processes"]}
    assert procs[main]["threads"] == 26, summ["processes"]
    assert len(procs) == 2 and [p["ppid"] for p in procs.values() if p["pid"] != main] == [main]


STAND_IN_CUDA_C = r"""
#include <stddef.h>
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) { return 0; }
"""


@pytest.mark.slow
def test_io_uring_fixed_reads_copied_are_dram_bounce_and_a_buffer_overwritten_is_not(datadir, tmp_path):
    """uring_fixed.c "stand-in": its READ_FIXED buffers copied through a libcuda.so.1 whose
    cuMemcpyHtoD_v2 copies nothing (the probes see the call and the host memory as with the real
    driver: tests/test_trace_content_live.py). Each copied fixed read is DRAM_BOUNCE, high (the
    address proves it); the read whose buffer the program overwrote before copying it is not (the
    probe keeps the buffer's fingerprint when the io_uring read completes); the READ into the
    program's own buffer, never copied, is HOST or UNKNOWN (with the reason), never DRAM_BOUNCE."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    exe, lib = str(tmp_path / "uring_fixed"), tmp_path / "cuda"
    lib.mkdir()
    (lib / "stand_in.c").write_text(STAND_IN_CUDA_C)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib / "libcuda.so.1"), str(lib / "stand_in.c")], check=True)
    subprocess.run([cc, "-O2", "-o", exe, URING_FIXED_C], check=True)
    f1, f2 = os.path.join(datadir, "u1.dat"), os.path.join(datadir, "u2.dat")
    out = tmp_path / "out.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "-o", str(out), "--", exe, f1, f2, "stand-in"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.path.dirname(HERE), "LD_LIBRARY_PATH": _prepend(str(lib))},
    )
    assert r.returncode == 0, r.stderr
    # each read, and what the program did with its buffer next: copied, overwritten then copied, or nothing
    out_lines = r.stdout.splitlines()
    reads = []
    for k, x in enumerate(out_lines):
        if x.startswith("op read"):
            nxt = out_lines[k + 1] if k + 1 < len(out_lines) else ""
            fate = "copied" if nxt.startswith("copy ") else "overwritten" if nxt.startswith("overwritten ") else "kept"
            reads.append((x.split()[6], int(x.split()[3]), fate))
    assert [f for _, _, f in reads] == ["copied", "kept", "copied", "copied", "overwritten"], r.stdout
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    verdicts: dict[tuple, list] = {}
    for v in sorted(
        (v for v in lines if v["type"] == "io" and v["api"] == "io_uring" and v["op"] == "read"), key=lambda v: v["ts"]
    ):
        verdicts.setdefault((v["path"], v["offset"]), []).append(v)
    for path, off, fate in reads:  # (in order: the control reads u1 at 64 KiB again)
        v = verdicts[(path, off)].pop(0)
        text = "; ".join(v["evidence"])
        if fate == "overwritten":
            assert v["route"] != "DRAM_BOUNCE" or v["confidence"] == "low", text
        elif fate == "copied":
            assert (v["route"], v["confidence"]) == ("DRAM_BOUNCE", "high"), text
        else:  # (never copied: HOST, or UNKNOWN where a copy of other bytes followed it, with the reason)
            assert v["route"] in ("HOST", "UNKNOWN"), text
