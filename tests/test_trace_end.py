"""How a live trace ends (issue 21, issue 24 item 7), on this kernel with real probes: the summary
within a second (the tests allow two, for a loaded machine) of the traced program's exit or of a
signal, nothing of the probes left in the kernel afterwards, and the traced process tree stopped
with the trace (also when gdsdiag itself is killed). The filters' values are not compiled in (one
cached program for all)."""

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import live

HERE = os.path.dirname(os.path.abspath(__file__))
# The goal is 1 s (benchmarks/trace_end.py measures it: 0.07-0.52 s on the dev VM); the tests allow
# twice that, as a shared CI machine at load 9 can hold a process off its CPU for a while. The code
# before this change took 10-15 s here.
SUMMARY_S = 2.0
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
BPF_PROG_GET_FD_BY_ID, BPF_LINK_GET_FD_BY_ID = 13, 30


def _env():
    """gdsdiag importable from the checkout, its stdout buffered as a user's is: PYTHONUNBUFFERED (set
    on the machines these tests ran on) hid verdict lines that waited in a pipe's 8 KiB buffer."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _spawn(args):
    return subprocess.Popen(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        start_new_session=True,  # as from a script or a service: not a terminal's foreground job
    )


def _wait_live(p):
    while True:
        line = p.stderr.readline()
        assert line, "gdsdiag ended before it was live"
        if b"tracing" in line:
            return


def _bpf_ids(pid):
    """(program ids, link ids) the process holds descriptors of (its /proc fdinfo)."""
    progs, links = set(), set()
    d = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k == "prog_id":
                progs.add(int(v))
            elif k == "link_id":
                links.add(int(v))
    return progs, links


def _exists(cmd, ident):
    """Whether the kernel still has the BPF program (or link) of this id."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 4)(ident, 0, 0, 0)
    fd = libc.syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd >= 0:
        os.close(fd)
        return True
    assert ctypes.get_errno() == 2, os.strerror(ctypes.get_errno())  # ENOENT: gone
    return False


def _alive(marker, *but):
    """Live processes (not zombies) with MARKER in their command line, but these pids."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid() and int(d) not in but:
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        with open(f"/proc/{d}/stat") as s:
                            if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                                out.append(int(d))
            except OSError:
                pass
    return out


@live
def test_summary_within_a_second_of_the_exit_and_nothing_left_in_the_kernel(tmp_path):
    stamp = tmp_path / "exited"
    prog = f"import time; time.sleep(1.5); open({str(stamp)!r}, 'w').write(repr(time.monotonic()))"
    p = _spawn(["--", PY, "-c", prog])
    _wait_live(p)
    time.sleep(0.5)  # (attached, the program sleeping)
    progs, links = _bpf_ids(p.pid)
    t_summary = None
    for line in p.stdout:
        if b'"type": "summary"' in line:
            t_summary = time.monotonic()
            summ = json.loads(line)
    p.wait(60)
    t_exit = time.monotonic()
    exited = float(stamp.read_text())
    assert p.returncode == 0, p.stderr.read()
    assert summ["traced_exit_code"] == 0
    assert t_summary - exited <= SUMMARY_S, f"summary {t_summary - exited:.2f} s after the program's exit"
    assert t_exit - exited <= 2 * SUMMARY_S, f"gdsdiag exited {t_exit - exited:.2f} s after the program"
    assert progs, "no BPF program found among gdsdiag's descriptors while it traced"
    # a link's id goes as it is closed (its uprobes are unregistered then); the program it held is
    # put after an RCU grace period (bpf_link_free defers it), so it may outlive gdsdiag briefly
    assert [i for i in links if _exists(BPF_LINK_GET_FD_BY_ID, i)] == []
    deadline = time.monotonic() + 5
    while [i for i in progs if _exists(BPF_PROG_GET_FD_BY_ID, i)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [i for i in progs if _exists(BPF_PROG_GET_FD_BY_ID, i)] == []
    with open("/sys/kernel/tracing/uprobe_events") as f:  # (bcc's event names end in _bcc_<pid>)
        assert [ln for ln in f if f"bcc_{p.pid}" in ln] == []


def _marker():
    """A number no other process has in its command line: the sleeps of the tree carry it."""
    return str(3_000_000 + uuid.uuid4().int % 1_000_000)


def _tree_trace(marker):
    """A traced shell that ignores SIGTERM, with a child in the background and one in the foreground."""
    p = _spawn(["--", "/bin/sh", "-c", f'trap "" TERM; sleep {marker} & sleep {marker}; : {marker}'])
    try:
        _wait_live(p)
        deadline = time.monotonic() + 10
        while len(_alive(marker, p.pid)) < 3 and time.monotonic() < deadline:  # the shell and its two sleeps
            time.sleep(0.05)
        assert len(_alive(marker, p.pid)) == 3
    except BaseException:
        p.kill()  # (its watcher then kills the tree)
        raise
    return p


@live
@pytest.mark.parametrize("sigs", [[signal.SIGTERM], [signal.SIGINT], [signal.SIGHUP], [signal.SIGTERM, signal.SIGINT]])
def test_a_signal_stops_the_whole_tree_and_the_summary_comes_within_a_second(sigs):
    marker = _marker()
    p = _tree_trace(marker)
    try:
        t0 = time.monotonic()
        for i, sig in enumerate(sigs):
            if i:
                time.sleep(0.02)  # a second signal while the first is being handled
            os.kill(p.pid, sig)
        t_summary = None
        for line in p.stdout:
            if b'"type": "summary"' in line:
                t_summary = time.monotonic()
        p.wait(60)
        assert t_summary is not None, "no summary"
        assert t_summary - t0 <= SUMMARY_S, f"summary {t_summary - t0:.2f} s after the signal"
        assert p.returncode == 128 + sigs[0]
        time.sleep(0.2)
        assert _alive(marker) == [], "the traced tree outlived the trace"
    finally:
        for pid in _alive(marker):
            os.kill(pid, signal.SIGKILL)


@live
def test_sigkill_of_gdsdiag_leaves_nothing_of_the_tree_running():
    marker = _marker()
    p = _tree_trace(marker)
    try:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        deadline = time.monotonic() + 3
        while _alive(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(marker) == [], "the traced tree outlived a killed gdsdiag"
    finally:
        for pid in _alive(marker):
            os.kill(pid, signal.SIGKILL)


def test_filters_are_not_compiled_in():
    """Every --pid/--cgroup/--comm value and --per-io: the same program text (one cache entry)."""
    from gdsdiag.trace.probes.bpf import Probes, config_values

    texts = {
        Probes(None, [], trace_all=a, cgroup=cg, comm=c, per_io=io, load=False, preattach=False).src
        for a, cg, c, io in [(True, None, None, False), (False, (123, 2), "fio", True), (False, None, "python3", False)]
    }
    assert len(texts) == 1
    assert config_values(False, (7, 3), "fio", True) == (7, 3, 0, 1, 3, int.from_bytes(b"fio", "little"), 0)
    # a name is cut to the kernel's 15 characters and NUL-padded
    full = config_values(False, None, "a" * 20, False)
    assert full[4] == 15 and full[6] == int.from_bytes(b"a" * 7 + b"\0", "little")


@live
def test_the_events_ring_read_from_its_mapping_gives_what_bccs_callback_gives(tmp_path):
    """ringread.py against bcc's per-record callback (GDSDIAG_RING_MMAP=0): the same I/Os, in order
    (4 KiB and more: smaller ones are no data path, and get no verdict)."""
    data = tmp_path / "ring.dat"
    prog = (
        "import os, sys; fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)\n"
        "for i in range(3000): os.pwrite(fd, b'x' * (4096 + i % 7), i * 8192)\n"
        "for i in range(3000): os.pread(fd, 4096 + i % 5, i * 8192)"
    )
    got = {}
    for mode in ("1", "0"):
        r = subprocess.run(
            [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "--", PY, "-c", prog, str(data)],
            capture_output=True,
            text=True,
            env={**_env(), "GDSDIAG_RING_MMAP": mode},
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        summ = lines[-1]
        assert summ["lost_events"] == 0
        assert not any("bcc's callback" in f for f in summ["probes_not_attached"])  # (x86-64: mapped)
        got[mode] = [(v["op"], v["offset"], v["size"]) for v in lines if v["type"] == "io" and v["path"] == str(data)]
        data.unlink()
    assert len(got["1"]) == 6000
    assert got["1"] == got["0"]


@live
def test_interval_lines_add_up_to_the_summary_with_host_io_counted_in_the_kernel(tmp_path):
    """--interval on a process without CUDA: its reads are counted in the kernel, and the intervals
    report what the counters gained, adding up to the summary's count."""
    data = tmp_path / "iv.dat"
    data.write_bytes(os.urandom(1 << 20))
    prog = (
        "import os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "for r in range(4):\n"
        "    for i in range(2000): os.pread(fd, 8192, (i % 128) * 8192)\n"
        "    time.sleep(0.35)"
    )
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--interval", "0.3", "--", PY, "-c", prog, str(data)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    ivs = [x for x in lines if x["type"] == "interval"]
    summ = lines[-1]
    mine = sum(x["count"] for x in summ["host_io_counted"] if x["path"] == str(data))
    assert mine == 8000
    per = [sum(t["count"] for t in x["top"] if t["path"] == str(data)) for x in ivs]
    assert sum(per) == 8000 and len([n for n in per if n]) >= 2, per  # spread over the intervals


@live
def test_a_quiet_programs_verdicts_come_when_their_wait_ends_not_at_its_next_event(tmp_path):
    """A program that writes a file and then goes quiet (a loader that has read its weights and now
    computes): the classifier's clock followed only the events, so the writes' verdicts (held 0.1 s
    for a libcufile call that might claim them) waited for its next event or its exit. The live
    loop now moves the clock to the time up to which every event has been read; the verdicts must
    reach us while the program still sleeps, within the latency goal (0.5 s; twice that allowed)."""
    data, stamp = tmp_path / "out.bin", tmp_path / "wrote"
    prog = (
        "import os, time\n"
        f"fd = os.open({str(data)!r}, os.O_WRONLY | os.O_CREAT, 0o600)\n"
        "for i in range(4):\n"
        "    os.pwrite(fd, b'x' * (1 << 20), i << 20)\n"
        f"open({str(stamp)!r}, 'w').write(repr(time.monotonic()))\n"
        "time.sleep(4)\n"
    )
    p = _spawn(["--per-io", "--", PY, "-c", prog])
    try:
        _wait_live(p)
        seen = []
        for line in p.stdout:
            if b'"type": "io"' in line and str(data).encode() in line:
                seen.append(time.monotonic())
                if len(seen) == 4:
                    break
        wrote = float(stamp.read_text())
        assert len(seen) == 4, seen
        assert p.poll() is None, "the program ended before its verdicts came"
        assert max(seen) - wrote <= 2 * 0.5, f"the last write's verdict came {max(seen) - wrote:.2f} s after it"
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)


@live
def test_intervals_say_what_is_waiting_for_evidence_instead_of_showing_nothing(tmp_path):
    """--per-io reads of a process without CUDA yet wait for the data-flow window (30 s before a
    job's first copy: a copy may still take their bytes), so an interval showed no HOST row and no
    hint of them. Each live interval now carries ``waiting``: the reads not decided yet, per
    process; at the end (the program exited) every one of them has its verdict."""
    data = tmp_path / "w.dat"
    data.write_bytes(os.urandom(1 << 20))
    prog = (
        "import os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "for r in range(3):\n"
        "    for i in range(16): os.pread(fd, 65536, i * 65536)\n"
        "    time.sleep(0.4)"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gdsdiag",
            "trace",
            "--json",
            "--per-io",
            "--interval",
            "0.3",
            "--",
            PY,
            "-c",
            prog,
            str(data),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    ivs = [x for x in lines if x["type"] == "interval"]
    waits = [x["waiting"] for x in ivs if "waiting" in x]
    assert waits and max(w["ios"] for w in waits) >= 16, ivs
    w = max(waits, key=lambda w: w["ios"])
    mine = [row for row in w["by_process"] if row["comm"] == "python3"]
    assert mine and mine[0]["bytes"] == mine[0]["ios"] * 65536, w
    ios = [x for x in lines if x["type"] == "io" and x["path"] == str(data)]
    assert len(ios) == 48 and {x["route"] for x in ios} == {"HOST"}
