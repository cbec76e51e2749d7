"""gdsdiag trace live on this kernel, on real programs: a process tree doing every kind of file I/O
(tests/workloads/tree.py and the io_uring program uring_rw.c built here), a process already running
before --pid, --comm and --cgroup. Needs root, bcc and a kernel headers tree (.ci/run links Debian's
6.1 headers); each test skips with the reason otherwise."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import LIVE_MARKS

from gdsdiag.trace.model.events import RECORD_VERSION
from gdsdiag.trace.recording import read_record

KiB, MiB = 1024, 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.join(HERE, "workloads", "tree.py")
URING_C = os.path.join(HERE, "workloads", "uring_rw.c")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable  # not a pyenv shell shim


pytestmark = LIVE_MARKS


def _env():
    """gdsdiag importable from any working directory (an uninstalled checkout too). Without
    PYTHONUNBUFFERED (set on the machines these tests run on): a traced Python program's print()
    is then one write, not one per piece, so a line it prints is never split by gdsdiag's."""
    root = os.path.dirname(HERE)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _parse(stdout):
    lines = [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    return [x for x in lines if x["type"] == "io"], next(x for x in lines if x["type"] == "summary")


def _shape(ios, d):
    """(process role, api, op, file, offset, size, route) of the I/O on files under d."""
    return [
        (v["pid"], v["api"], v["op"], os.path.basename(v["path"]), v["offset"], v["size"], v["route"])
        for v in ios
        if v["path"] and v["path"].startswith(d + "/")
    ]


@pytest.fixture
def datadir():
    # /var/tmp: a real disk (O_DIRECT works there; tmpfs refuses it)
    d = os.path.realpath(__import__("tempfile").mkdtemp(prefix="gdsdiag-trace-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.slow
def test_process_tree_every_syscall_exact_offsets_and_the_reused_descriptor(datadir, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    uring = None
    if cc:
        uring = str(tmp_path / "uring_rw")
        subprocess.run([cc, "-O2", "-o", uring, URING_C], check=True)
    rec, out = tmp_path / "rec.jsonl", tmp_path / "out.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "--record", str(rec), "-o", str(out), "--"]
        + [PY, TREE, datadir]
        + ([uring] if uring else []),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("attaching…") and "tracing, Ctrl-C to end" in r.stderr
    # -o: the verdicts in their file, the program's own lines alone on stdout (never split by a verdict)
    assert not any(x.startswith("{") for x in r.stdout.splitlines()), r.stdout[:500]
    ios, summ = _parse(out.read_text())
    pids = {}
    for line in r.stdout.splitlines():  # "op PID what": which process did what
        if line.startswith("op ") and line.split()[1].isdigit():
            pids.setdefault(" ".join(line.split()[2:4]), int(line.split()[1]))
    parent, child, gchild = pids["write first.dat"], pids["direct child.dat"], pids["buffered gc.dat"]
    H = "HOST"
    want = [
        (parent, "write", "write", "first.dat", 0, 64 * KiB, H),
        (parent, "write", "write", "first.dat", 64 * KiB, 64 * KiB, H),
        # the same fd number, now another file: never reported under the old name
        (parent, "write", "write", "second.dat", 0, 64 * KiB, H),
        (parent, "write", "write", "mm.dat", 0, MiB, H),
    ]
    want += [(child, "pwritev2", "write", "child.dat", i * MiB, MiB, H) for i in range(4)]
    want += [(child, "preadv2", "read", "child.dat", i * MiB, MiB, H) for i in range(4)]
    want += [
        (gchild, "write", "write", "gc.dat", 0, 256 * KiB, H),
        (gchild, "write", "write", "gc.dat", 256 * KiB, 256 * KiB, H),
        (gchild, "read", "read", "gc.dat", 0, 128 * KiB, H),
        (gchild, "readv", "read", "gc.dat", 128 * KiB, 128 * KiB, H),
        (gchild, "writev", "write", "gc.dat", 256 * KiB, 128 * KiB, H),
        (gchild, "pread64", "read", "gc.dat", 12 * KiB, 64 * KiB, H),  # through the dup'd fd
        (gchild, "copy_file_range", "read", "gc.dat", 0, 64 * KiB, H),
        (gchild, "copy_file_range", "write", "cfr.dat", 0, 64 * KiB, H),
        (gchild, "pwrite64", "write", "rel.dat", 4 * KiB, 8 * KiB, H),  # openat(dirfd, "rel.dat")
        (gchild, "mmap", "read", "mm.dat", 0, MiB, H),
    ]
    if uring:  # the grandchild exec'd the io_uring program: same pid, new name
        want += [
            (gchild, "io_uring", "write", "ur.dat", 0, 64 * KiB, H),
            (gchild, "io_uring", "write", "ur.dat", 64 * KiB, 64 * KiB, H),
            (gchild, "io_uring", "read", "ur.dat", 64 * KiB, 64 * KiB, H),
        ]
    got = _shape(ios, datadir)
    assert (
        sorted(got, key=lambda x: (x[0], x[1] == "mmap")) == sorted(want, key=lambda x: (x[0], x[1] == "mmap"))
        or got == want
    ), "\n".join(map(str, got))
    assert all("not on the GPU data path" in v["evidence"][-1] for v in ios if v["route"] == "HOST")
    assert summ["lost_events"] == 0 and summ["traced_exit_code"] == 0
    procs = {p["pid"]: p for p in summ["processes"]}
    assert procs[child]["ppid"] == parent and procs[gchild]["ppid"] == child
    if uring:
        assert procs[gchild]["comm"] == "uring_rw" and procs[gchild]["exe"] == uring
    # the recording re-analyses to the same verdicts anywhere
    r2 = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json"], capture_output=True, text=True
    )
    # (the same verdicts; a live trace prints each as soon as it is decided, a replay in time order)
    assert sorted(_shape(_parse(r2.stdout)[0], datadir)) == sorted(got)
    header, events = read_record(str(rec))
    assert header["gdsdiag_trace_record"] == RECORD_VERSION


PRE = r"""
import os, sys, time
d = sys.argv[1]
fd = os.open(os.path.join(d, "pre.dat"), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
os.write(fd, b"p" * 65536)                 # before the trace: position 64 KiB
r, w = os.pipe()
kid = os.fork()                            # a child that also exists before the trace
if kid == 0:
    os.close(w)
    os.read(r, 1)
    os.pwrite(fd, b"k" * 8192, 3 * 65536)  # the inherited descriptor
    os._exit(0)
os.close(r)
print("ready", kid, flush=True)
sys.stdin.readline()
os.write(fd, b"q" * 65536)                 # offset 64 KiB: the position read from /proc at adoption
os.write(w, b"x")
os.waitpid(kid, 0)
late = os.fork()                           # born during the trace
if late == 0:
    f2 = os.open(os.path.join(d, "late.dat"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.pwrite(f2, b"l" * 16384, 4096)
    os._exit(0)
os.waitpid(late, 0)
print("late", late, flush=True)
"""


def _start_trace(args, out_path):
    out = open(out_path, "w")
    err_path = out_path + ".err"
    t = subprocess.Popen(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", *args],
        stdout=out,
        stderr=open(err_path, "w"),
        text=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if "tracing, Ctrl-C to end" in open(err_path).read():
            return t, out
        if t.poll() is not None:
            raise AssertionError(open(err_path).read())
        time.sleep(0.2)
    t.kill()
    raise AssertionError("the trace did not go live in 300 s")


@pytest.mark.slow
def test_pid_follows_a_running_process_its_existing_child_and_new_children(datadir, tmp_path):
    script = tmp_path / "pre.py"
    script.write_text(PRE)
    app = subprocess.Popen([PY, str(script), datadir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = app.stdout.readline().split()
    kid = int(ready[1])
    t, out = _start_trace(["--pid", str(app.pid)], str(tmp_path / "trace.out"))
    app.stdin.write("go\n")
    app.stdin.flush()
    late = int(app.stdout.readline().split()[1])
    app.wait(30)
    t.wait(60)  # the trace ends when every followed process has gone
    out.close()
    ios, summ = _parse(open(tmp_path / "trace.out").read())
    assert _shape(ios, datadir) == [
        (app.pid, "write", "write", "pre.dat", 65536, 65536, "HOST"),
        (kid, "pwrite64", "write", "pre.dat", 3 * 65536, 8192, "HOST"),
        (late, "pwrite64", "write", "late.dat", 4096, 16384, "HOST"),
    ]
    procs = {p["pid"]: p for p in summ["processes"]}
    assert procs[kid]["ppid"] == app.pid and procs[late]["ppid"] == app.pid


@pytest.mark.slow
def test_comm_and_cgroup_select_processes_started_later(datadir, tmp_path):
    root = next((ln.split()[1] for ln in open("/proc/self/mounts") if ln.split()[2] == "cgroup2"), None)
    if root is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    cg = os.path.join(root, f"gdsdiag-test-{os.getpid()}")
    os.mkdir(cg)
    try:
        t, out = _start_trace(
            ["--comm", "gdsdiag-named", "--cgroup", cg, "--duration", "20"], str(tmp_path / "trace.out")
        )
        # one process by name (exec'd under that name), one moved into the cgroup before it writes
        named = tmp_path / "gdsdiag-named"
        os.symlink(PY, named)
        code = "import os,sys; fd=os.open(sys.argv[1], os.O_CREAT|os.O_WRONLY, 0o600); os.pwrite(fd, b'n'*8192, 8192)"
        subprocess.run([str(named), "-c", code, os.path.join(datadir, "named.dat")], check=True)
        incg = (
            "import os,sys; open(os.path.join(sys.argv[2], 'cgroup.procs'), 'w').write(str(os.getpid()));"
            "fd=os.open(sys.argv[1], os.O_CREAT|os.O_WRONLY, 0o600); os.pwrite(fd, b'c'*4096, 0)"
        )
        subprocess.run([PY, "-c", incg, os.path.join(datadir, "cg.dat"), cg], check=True)
        other = "import os,sys; fd=os.open(sys.argv[1], os.O_CREAT|os.O_WRONLY, 0o600); os.pwrite(fd, b'o'*8192, 0)"
        subprocess.run([PY, "-c", other, os.path.join(datadir, "other.dat")], check=True)
        t.send_signal(2)
        t.wait(60)
        out.close()
    finally:
        os.rmdir(cg)
    ios, summ = _parse(open(tmp_path / "trace.out").read())
    got = sorted((x[3], x[4], x[5]) for x in _shape(ios, datadir))
    assert got == [("cg.dat", 0, 4096), ("named.dat", 8192, 8192)]


COPY_USER = r"""
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
time.sleep(float(sys.argv[2]))   # a copy first seen while tracing is probed within a poll (~0.1 s) of being mapped
v = ctypes.c_int(0)
lib.cuFileGetVersion.restype = ctypes.c_uint64
lib.cuFileDriverOpen.restype = ctypes.c_uint64
print("version", lib.cuFileGetVersion(ctypes.byref(v)) & 0xffffffff, v.value, flush=True)
print("open", lib.cuFileDriverOpen() & 0xffffffff, flush=True)
"""


@pytest.mark.slow
def test_two_processes_with_two_libcufile_copies_are_both_probed(tmp_path):
    from gdsdiag.platform.libcufile import locate

    wheel = locate().path
    if wheel is None:
        pytest.skip("no libcufile here (the nvidia-cufile wheel)")
    other = tmp_path / "vendored" / "libcufile.so.0"  # a framework's or container's own copy
    other.parent.mkdir()
    shutil.copy(wheel, other)
    user = tmp_path / "user.py"
    user.write_text(COPY_USER)
    rec = tmp_path / "rec.jsonl"
    sh = f"{PY} {user} {wheel} 0 && {PY} {user} {other} 0.5"
    # (in tmp_path: libcufile writes its cufile.log into the working directory)
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--record", str(rec), "--", "/bin/sh", "-c", sh],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=str(tmp_path),
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    ios, summ = _parse(r.stdout)
    libs = {os.path.realpath(x["path"]): x for x in summ["libraries"] if x["kind"] == "libcufile"}
    assert os.path.realpath(wheel) in libs and os.path.realpath(str(other)) in libs
    # the copy is the same build: its USDT sites get the handlers compiled for the first
    assert (
        libs[os.path.realpath(wheel)]["usdt"] > 0
        and libs[os.path.realpath(str(other))]["usdt"] == libs[os.path.realpath(wheel)]["usdt"]
    )
    header, events = read_record(str(rec))
    users = sorted({e.pid for e in events if e.kind == "api_enter" and e.name == "cuFileGetVersion"})
    assert len(users) == 2  # one call through each copy, each seen
    assert libs[os.path.realpath(str(other))]["pids"] == [users[1]]
    opened = [e for e in events if e.kind == "api_exit" and e.name == "cuFileDriverOpen"]
    assert sorted(e.pid for e in opened) == users
    if not os.path.exists("/dev/nvidiactl"):
        # USDT fires on the failing-open path of both copies
        assert sorted(e.pid for e in events if e.kind == "usdt" and e.name == "cufio_core:cufio_core-1106") == users


def test_bad_selectors_are_one_clear_line():
    for args, msg, code in (
        # the largest pid Linux allows, never running: the command line names nothing (usage, 4)
        (["--pid", "4194304"], "no process 4194304", 4),
        (["--", "/nonexistent/gdsdiag-no-such-program"], "command not found", 4),
        (["--cgroup", "/nonexistent/gdsdiag-x"], "cgroup v2", 3),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "gdsdiag", "trace", *args], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == code and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len([ln for ln in r.stderr.splitlines() if ln.startswith("gdsdiag: error")]) == 1


FLOOD = os.path.join(HERE, "workloads", "sysfs_flood.py")


def _flood(datadir, *opts):
    # -o: the program's "flood N" line is its stdout's own. On one stdout, a CI run with
    # PYTHONUNBUFFERED=1 (print's text and newline then two writes) had a poll's flushed verdict
    # lines land between them: "flood 88392{"type": …".
    out = os.path.join(datadir, "verdicts.jsonl")
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", *opts, "-o", out, "--", PY, FLOOD, datadir, "1500"],
        capture_output=True,
        text=True,
        timeout=400,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    opens = int(next(x for x in r.stdout.splitlines() if x.startswith("flood ")).split()[1])
    with open(out) as f:
        ios, summ = _parse(f.read())
    os.unlink(out)
    return opens, ios, summ


FLOOD_IOS = (
    [("pwrite64", "write", "flood.dat", i * 4 * KiB, 4 * KiB, "HOST") for i in range(64)]
    + [("pread64", "read", "flood.dat", i * 4 * KiB, 4 * KiB, "HOST") for i in range(64)]
    + [("read", "read", "flood.dat", i * 16 * KiB, 16 * KiB, "HOST") for i in range(16)]
)


@pytest.mark.slow
def test_driver_open_flood_of_sysfs_and_procfs_opens_loses_nothing(datadir):
    """libcufile's cuFileDriverOpen walks sysfs/procfs with tens of thousands of open/read/close
    calls, many relative to a directory descriptor (on the GPU machine the old probe lost 51,379
    events of fio's forked jobs that way and attributed none of their I/O). The kernel keeps those
    descriptors to itself now: no event for them, nothing lost, every data I/O exact."""
    opens, ios, summ = _flood(datadir, "--per-io")
    assert opens > 80_000  # the flood really happened
    assert summ["lost_events"] == 0
    got = [(v["api"], v["op"], os.path.basename(v["path"]), v["offset"], v["size"], v["route"]) for v in ios]
    got = [x for x in got if x[2] == "flood.dat"]
    assert got == FLOOD_IOS
    # a few hundred events for the program's own start-up and its 144 I/Os, none per sysfs open
    assert summ["events"] < 3000, summ["events"]


@pytest.mark.slow
def test_host_io_of_a_process_without_cuda_is_counted_in_the_kernel(datadir):
    """Without --per-io the same program's host I/O is counted in the kernel per (process, file,
    syscall, size class): nothing is sent per I/O, and the summary still accounts every one."""
    opens, ios, summ = _flood(datadir)
    assert summ["lost_events"] == 0
    assert not [v for v in ios if v["path"] and v["path"].endswith("flood.dat")]
    rows = [r for r in summ["host_io_counted"] if r["path"].endswith("/flood.dat")]
    assert sorted((r["api"], r["op"], r["size_class"], r["count"], r["bytes"], r["route"]) for r in rows) == [
        ("pread64", "read", "4 KiB-8 KiB", 64, 64 * 4 * KiB, "HOST"),
        ("pwrite64", "write", "4 KiB-8 KiB", 64, 64 * 4 * KiB, "HOST"),
        ("read", "read", "16 KiB-32 KiB", 16, 16 * 16 * KiB, "HOST"),
    ]
    assert summ["routes"]["HOST"]["count"] >= 144 and summ["ios_counted_in_kernel"] >= 144
    assert summ["events"] < 1000, summ["events"]


@pytest.mark.slow
def test_second_start_loads_the_compiled_program_from_the_cache(tmp_path):
    """bcc compiles with clang at every start; the compiled program is kept per (text, kernel, bcc)
    and a second trace with the same options loads it without clang. A cache file someone else
    could have written is not used."""
    from gdsdiag.trace.probes import bpfcache

    cache = tmp_path / "cache" / "gdsdiag"  # a cache of its own (root's default: /var/cache/gdsdiag)
    env = {**_env(), "GDSDIAG_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "gdsdiag", "trace", "--json", "--", "/bin/true"]
    starts = []
    for _ in range(2):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
        assert r.returncode == 0, r.stderr
        starts.append(_parse(r.stdout)[1]["startup_s"])
    assert starts[0]["cached"] is False and starts[1]["cached"] is True
    files = list((cache / "bpf").iterdir())
    assert len(files) == 1 and (files[0].stat().st_mode & 0o777) == 0o600
    os.chmod(files[0], 0o666)  # writable by others: not trusted
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
    assert _parse(r.stdout)[1]["startup_s"]["cached"] is False
    assert bpfcache.FORMAT == 1


FLIP = r"""
import os, sys
d = sys.argv[1]
fd = os.open(os.path.join(d, "seq.dat"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, b"s" * (8 * 65536))
os.lseek(fd, 0, os.SEEK_SET)
for _ in range(3):
    os.read(fd, 65536)                      # counted in the kernel: no CUDA library opened yet
lib = os.path.join(d, "libcudart.so.99")    # what loading the CUDA runtime looks like to the probe
open(lib, "wb").close()
os.close(os.open(lib, os.O_RDONLY))
os.read(fd, 65536)                          # sent per I/O now, at the position the counted reads left
os.pread(fd, 65536, 5 * 65536)
"""


@pytest.mark.slow
def test_counted_reads_then_cuda_loaded_keeps_the_file_position(datadir, tmp_path):
    """A process that reads before it loads a CUDA library: the first reads are counted in the kernel,
    the later ones sent one by one (a CUDA copy may follow them), and the first of those starts
    where the counted ones left the file position."""
    script = tmp_path / "flip.py"
    script.write_text(FLIP)
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--", PY, str(script), datadir],
        capture_output=True,
        text=True,
        timeout=400,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    ios, summ = _parse(r.stdout)
    got = [(v["api"], v["offset"], v["size"]) for v in ios if v["path"] and v["path"].endswith("/seq.dat")]
    assert got == [("read", 3 * 65536, 65536), ("pread64", 5 * 65536, 65536)]
    rows = [x for x in summ["host_io_counted"] if x["path"].endswith("/seq.dat")]
    assert sorted((x["api"], x["count"], x["bytes"]) for x in rows) == [("read", 3, 3 * 65536), ("write", 1, 8 * 65536)]
    assert summ["lost_events"] == 0


def _cold_files(*files):
    """Each (path, size): written with random bytes, then put out of the page cache, so that its
    pages fault in (and are filled) when a program maps and reads it."""
    for p, n in files:
        with open(p, "wb") as f:
            f.write(os.urandom(n))
            f.flush()
            os.fsync(f.fileno())
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


ANON_FD0 = r"""
import ctypes, mmap, os, sys, time
lib, data = sys.argv[1], sys.argv[2]
# (past the 200 ms after Python's own start-up mappings, such as the locale archive's: the kernel sends
# every page fill in that window, as it cannot tell a data file's inode from its descriptor)
time.sleep(0.5)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
# the CUDA driver's reservations: anonymous, with descriptor 0 (the kernel ignores it under MAP_ANONYMOUS)
for _ in range(4):
    a = libc.mmap(None, 3 << 20, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, 0, 0)
    assert a not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
# then a library's pages faulting in from outside the cache (a code file: the trace never wants them)
fd = os.open(lib, os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
sum(m[i] for i in range(0, len(m), 4096))
# and a data file mapped and read through the mapping (its mmap is the trace's to see)
fd2 = os.open(data, os.O_RDONLY)
m2 = mmap.mmap(fd2, 0, prot=mmap.PROT_READ)
sum(m2[i] for i in range(0, len(m2), 4096))
print("mapped", flush=True)
"""


@pytest.mark.slow
def test_anonymous_mappings_with_descriptor_0_are_no_file_mappings_and_open_no_page_window(datadir):
    """mmap(MAP_ANONYMOUS) with fd 0, as the CUDA driver calls it: the probe sent each as a mapping
    of descriptor 0 (stdin, here a data file), and each opened the kernel's 200 ms window in which
    every page-cache fill of the process is sent, so a library's pages faulting in from outside the
    cache came one event a page (on the GPU machine 8-18k events lost in a burst)."""
    lib = os.path.join(datadir, "libfake.so.1")  # (".so": code, which the kernel keeps to itself)
    data, stdin = os.path.join(datadir, "mapped.dat"), os.path.join(datadir, "stdin.dat")
    _cold_files((lib, 8 * MiB), (data, 1 * MiB), (stdin, 1 * MiB))
    rec = os.path.join(datadir, "rec.jsonl")
    with open(stdin, "rb") as sin:
        r = subprocess.run(
            [sys.executable, "-m", "gdsdiag", "trace", "--record", rec, "--json", "--",
             PY, "-c", ANON_FD0, lib, data],
            stdin=sin, capture_output=True, text=True, timeout=400, env=_env(),
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "mapped" in r.stdout
    _, events = read_record(rec)
    maps = [e for e in events if e.kind == "fd" and e.name == "mmap"]
    assert not [e for e in maps if e.args[2] == 3 << 20], "an anonymous mapping was sent as a file's"
    assert [e for e in maps if e.args[2] == 1 * MiB], "the data file's mapping was not sent"
    ino = os.stat(lib).st_ino
    lib_pages = [e for e in events if e.kind == "pages" and e.args[1] == ino]
    assert not lib_pages, f"{len(lib_pages)} page fills of a library were sent"
    summ = _parse(r.stdout)[1]
    assert summ["lost_events"] == 0


CUDA_LIB_PAGES = r"""
import mmap, os, sys, time
lib, data = sys.argv[1], sys.argv[2]
fd = os.open(data, os.O_RDONLY)  # a data file mapped first: the process's page fills can be sent
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
sum(m[i] for i in range(0, len(m), 4096))
time.sleep(0.5)  # (past the 200 ms window that mapping opens)
lf = os.open(lib, os.O_RDONLY)  # a CUDA library's open: the kernel names it so its copy can be probed
time.sleep(0.5)  # (the reader has seen that open by now)
ml = mmap.mmap(lf, 0, prot=mmap.PROT_READ)
sum(ml[i] for i in range(0, len(ml), 4096))  # its pages fault in from outside the cache
print("mapped", flush=True)
"""


@pytest.mark.slow
def test_a_cuda_librarys_cold_pages_are_not_sent(datadir):
    """The kernel names the opens of CUDA libraries ("/libcu…": libcuda, libcufile, and libcublasLt,
    libcudnn…) so the reader can probe the copy a process loads. The reader took each such open's
    inode for a data file's, so the kernel sent every page fill of the library: on the GPU machine,
    with the page cache cold, libcublasLt's 259 MB came as 66k events at CUDA's start-up, and runs lost
    8-18k events of the workload. A library's pages are code: none is sent."""
    lib, data = os.path.join(datadir, "libcublasFake.so.13"), os.path.join(datadir, "mapped.dat")
    _cold_files((lib, 8 * MiB), (data, 1 * MiB))
    rec = os.path.join(datadir, "rec.jsonl")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gdsdiag",
            "trace",
            "--record",
            rec,
            "--json",
            "--",
            PY,
            "-c",
            CUDA_LIB_PAGES,
            lib,
            data,
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    assert "mapped" in r.stdout
    _, events = read_record(rec)
    assert [e for e in events if e.kind == "open" and e.path == lib], "the library's open was not named"
    ino = os.stat(lib).st_ino
    pages = [e for e in events if e.kind == "pages" and e.args[1] == ino]
    assert not pages, f"{len(pages)} page fills of a CUDA library were sent"
    assert [e for e in events if e.kind == "pages" and e.args[1] == os.stat(data).st_ino], "the data file's fills"
    assert _parse(r.stdout)[1]["lost_events"] == 0


DIR_WALK = r"""
import os, sys
# libcufile's start-up walk as recorded on the GPU machine (2026-12-06): open("/", O_PATH|O_DIRECTORY),
# a relative O_PATH open from it, another absolute one, three closes; here as fast as Python goes
fl = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
for i in range(int(sys.argv[1])):
    a = os.open("/", fl)
    b = os.open("usr", fl, dir_fd=a)
    c = os.open("/", fl)
    os.close(b); os.close(c); os.close(a)
print("walked", flush=True)
"""


@pytest.mark.slow
def test_processes_walking_directories_at_once_lose_no_event(datadir):
    """Named directories (opened by absolute path) are sent so that files opened relative to them
    can be named: CUDA's and libcufile's start-up open thousands. Four processes starting at once on
    the GPU machine lost 2.6-2.9k events each (a 4 MiB ring, and a stat and a map update by the
    reader for every such open). Two processes making 20,000 such opens each in well under a second:
    nothing lost."""
    out, prog = os.path.join(datadir, "v.jsonl"), os.path.join(datadir, "walk.py")
    with open(prog, "w") as f:
        f.write(DIR_WALK)
    walk = f"{PY} {prog} 10000"
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "-o", out, "--", "sh", "-c", f"{walk} & {walk}; wait"],
        capture_output=True,
        text=True,
        timeout=400,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("walked") == 2
    with open(out) as f:
        summ = _parse(f.read())[1]
    assert summ["events"] >= 2 * 10_000 * 4  # (two named opens and their closes a round: they were sent)
    assert summ["lost_events"] == 0, summ["lost_by_process"]
