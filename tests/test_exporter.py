"""gdsdiag exporter: scraped over HTTP on 127.0.0.1 and checked with promtool and prometheus_client's
parser. nvidia-fs statistics come from the real capture in the H200-based tree (check_fixtures.add_nvidia_fs),
verdicts from the real H200 snapshot, trace counters from the real trace recordings, and the cuFile
process scan from a real process that has loaded this machine's libcufile."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("prometheus_client")
from check_fixtures import add_nvidia_fs, unpack_h200  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from gdsdiag.check.context import CheckContext  # noqa: E402
from gdsdiag.exporter.collect import TraceCounters, bound  # noqa: E402
from gdsdiag.exporter.server import State, refresh, start  # noqa: E402
from gdsdiag.platform.fsroot import FsRoot  # noqa: E402
from gdsdiag.validate.policy import load  # noqa: E402
from gdsdiag.validate.runner import run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "fixtures", "trace")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = unpack_h200(str(tmp_path_factory.mktemp("h200")))
    add_nvidia_fs(root)
    return root


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def promtool_ok(text):
    promtool = shutil.which("promtool")
    if promtool is None:
        return None
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return True


@pytest.fixture(scope="module")
def served(tree):
    state = State(trace=TraceCounters())
    refresh(state, lambda: run(CheckContext(FsRoot(tree)), load(), [], "static"))
    from gdsdiag.trace.live import replay

    for name in ("trace-h200-cufile.jsonl.gz", "trace-h200-bounce.jsonl.gz"):
        replay(os.path.join(TRACE, name), None, state.trace)
    server, _ = start(FsRoot(tree), 0, "127.0.0.1", state)
    yield server.server_port, state
    server.shutdown()


def test_scrape_nvidia_fs(served):
    port, _ = served
    f = families(scrape(port))
    assert [s.value for s in f["gdsdiag_nvfs_up"].samples] == [1]
    info = f["gdsdiag_nvfs_info"].samples[0].labels
    assert info["driver_version"] == "2.25.7" and info["gds_version"] == "1.14.0.31"  # the real stats capture
    ev = {(s.labels["section"], s.labels["key"]): s.value for s in f["gdsdiag_nvfs_events"].samples}
    assert ev[("Mmap", "n")] == 1 and ev[("Bar1-map", "ok")] == 1 and ev[("Ops", "Read")] == 0
    gpu = {s.labels["key"]: s.value for s in f["gdsdiag_nvfs_gpu"].samples if s.labels["gpu"] == "0000:01:00.0"}
    assert gpu["max_pinned_MiB"] == 1 and gpu["Registered_MiB"] == 0


def test_scrape_verdicts_and_trace(served):
    port, state = served
    f = families(scrape(port))
    rp = {s.labels["rule"]: s.value for s in f["gdsdiag_rule_pass"].samples}
    assert rp["drivers.nvidia"] == 1 and rp["platform.iommu"] == 1
    assert f["gdsdiag_verdicts_timestamp_seconds"].samples[0].value == pytest.approx(state.when)
    ios = [s for s in f["gdsdiag_trace_ios"].samples if s.name.endswith("_total")]
    assert sum(s.value for s in ios if s.labels["route"] == "COMPAT") == 18
    # the bounce recording: 16 bounced 1 MiB I/Os; the sweep's 9 pattern-file writes are HOST I/O
    assert sum(s.value for s in ios if s.labels["route"] == "DRAM_BOUNCE") == 16
    assert sum(s.value for s in ios if s.labels["route"] == "HOST") == 9
    byt = sum(
        s.value for s in f["gdsdiag_trace_bytes"].samples if s.name.endswith("_total") and s.labels["route"] == "COMPAT"
    )
    assert byt == 106430564


def test_promtool_on_scrape(served):
    port, _ = served
    if promtool_ok(scrape(port)) is None:
        pytest.skip("promtool not installed (Debian package 'prometheus')")


def test_comm_labels_are_bounded():
    from collections import Counter

    c = Counter({f"p{i}": i + 1 for i in range(40)})
    b = bound(c, 16)
    assert len(b) == 17 and b["other"] == sum(range(1, 25)) and sum(b.values()) == sum(c.values())
    t = TraceCounters(limit=3)
    for i in range(10):
        t({"route": "COMPAT", "comm": f"w{i}", "op": "read", "size": 4096, "pid": 1})  # the keys of an io line it reads
    comms = {k[1] for k in t.ios}
    # (no identities reader: no pod labels, '' as for a host process)
    assert comms == {"w0", "w1", "w2", "other"} and t.ios[("COMPAT", "other", "read", "", "", "")] == 7


def test_refresh_error_is_counted_not_fatal():
    state = State()

    def broken():
        raise RuntimeError("boom")

    refresh(state, broken)
    assert state.errors == 1 and "boom" in state.last_error and state.report is None


def test_cufile_process_scan_finds_a_real_process():
    from gdsdiag.exporter.collect import cufile_processes
    from gdsdiag.platform.libcufile import locate

    lib = locate().path
    if not lib:
        pytest.skip("no libcufile on this machine")
    code = (
        f"import ctypes, sys, time; ctypes.CDLL({lib!r}); sys.stdout.write('ok\\n'); sys.stdout.flush(); time.sleep(30)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ok"
        with open(f"/proc/{p.pid}/comm") as f:
            comm = f.read().strip()
        assert cufile_processes(FsRoot("/"))[comm] >= 1
    finally:
        p.kill()
        p.wait()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_cli_serves_and_refuses_a_busy_port(tree):
    port = free_port()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gdsdiag",
            "exporter",
            "--root",
            tree,
            "--port",
            str(port),
            "--addr",
            "127.0.0.1",
            "--interval",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        text = None
        for _ in range(100):
            try:
                text = scrape(port)
                if "gdsdiag_rule_pass{" in text:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert text and "gdsdiag_rule_pass{" in text and "gdsdiag_nvfs_up 1.0" in text
        promtool_ok(text)
        busy = subprocess.run(
            [sys.executable, "-m", "gdsdiag", "exporter", "--root", tree, "--port", str(port), "--addr", "127.0.0.1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert busy.returncode == 3 and "cannot listen" in busy.stderr and busy.stderr.count("\n") == 1
    finally:
        p.terminate()
        p.wait(10)


def test_fleet_doc_lists_every_exported_metric(served):
    port, _ = served
    with open(os.path.join(os.path.dirname(HERE), "docs", "fleet.md")) as f:
        doc = f.read()
    for fam in text_string_to_metric_families(scrape(port)):
        name = fam.name + ("_total" if fam.type == "counter" else "")
        assert f"`{name}`" in doc, name


def test_stats_segments_from_the_gpu_machine_capture(tmp_path):
    """/proc/sysvipc/shm as sampled on the GPU machine while validate ran (two runs, pids 476 and 1046);
    the processes' maps name the libcufile of the wheel they loaded (the GPU machine's path)."""
    from gdsdiag.exporter.collect import process_families, stats_segments

    with open(os.path.join(HERE, "fixtures", "gpu-machine", "sysvipc-shm-during-validate.txt")) as f:
        text = "".join(line for line in f if not line.startswith("#"))
    root = tmp_path / "root"
    (root / "proc" / "sysvipc").mkdir(parents=True)
    (root / "proc" / "sysvipc" / "shm").write_text(text)
    lib = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcufile.so.0"
    for pid in (476, 1046):
        (root / "proc" / str(pid)).mkdir()
        (root / "proc" / str(pid) / "maps").write_text(f"7f0000000000-7f0000100000 r-xp 00000000 fe:01 1234 {lib}\n")
        (root / "proc" / str(pid) / "comm").write_text("python3\n")
    assert stats_segments(FsRoot(str(root))) == {476: 31888, 1046: 31888}
    fams = {f.name: f for f in process_families(FsRoot(str(root)))}
    assert [(s.labels["comm"], s.value) for s in fams["gdsdiag_cufile_stats_published"].samples] == [("python3", 2)]
    assert [(s.labels["comm"], s.value) for s in fams["gdsdiag_cufile_processes"].samples] == [("python3", 2)]


def test_a_path_that_is_no_directory_is_refused_before_serving(tmp_path):
    """Issue 46: `exporter --path /nonexistent` served on, each refresh failing on it; check and
    validate refuse such a --path with exit 4 (docs/json.md), so does the exporter, before it listens."""
    from conftest import GDSDIAG

    f = tmp_path / "file"
    f.write_text("x")
    for path, why in ((str(tmp_path / "nope"), "does not exist"), (str(f), "is not a directory")):
        r = subprocess.run(
            [*GDSDIAG, "exporter", "--path", path, "--port", "0"], capture_output=True, text=True, timeout=30
        )
        assert r.returncode == 4 and f"--path {path} {why}" in r.stderr and r.stderr.count("\n") == 1, r.stderr
