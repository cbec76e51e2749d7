"""The fleet view on this kernel with real cgroups: a dozen "pods" built as kubelet and the runtimes
name them (containerd under kubelet's cgroupfs driver on cgroup v1, containerd under its systemd
driver on the cgroup v2 hierarchy, CRI-O under its systemd driver on v1 — the names of
platform/containers.py, each cited there), a /var/log/pods tree under a temporary root, and a real
process in each reading the same file at once. gdsdiag trace --namespace / --pod must trace exactly
those pods' processes and label every process, tree and per-pod total. Needs root, bcc and kernel
headers (skips with the reason otherwise); every cgroup made here is removed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import GDSDIAG, LIVE_MARKS
from pods_fixture import V1, build, cgroup_roots, remove
from pods_fixture import specs as pod_specs

pytestmark = [*LIVE_MARKS, pytest.mark.slow]

MiB = 1 << 20
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
# Joins the cgroups named on the command line, says so, waits for "go", reads the file in 1 MiB
# preads, says so, and waits for a last line to exit.
LOADER = r"""
import os, sys
for d in sys.argv[2:]:
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
print("ready", flush=True)
sys.stdin.readline()
fd = os.open(sys.argv[1], os.O_RDONLY)
off = 0
while True:
    b = os.pread(fd, 1 << 20, off)
    if not b:
        break
    off += len(b)
os.close(fd)
print("done", off, flush=True)
sys.stdin.readline()  # (a server lives on after its load: a process gone before the trace's next poll,
                      # ~0.1 s, is a zombie, and on cgroup v1 a zombie's /proc/PID/cgroup says "/")
"""


# The same, reading on each "go N" line N bytes of the file from its start (1 MiB preads), until "exit".
LOOP_LOADER = r"""
import os, sys
for d in sys.argv[2:]:
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
print("ready", flush=True)
for line in sys.stdin:
    if not line.startswith("go"):
        break
    want = int(line.split()[1])
    fd = os.open(sys.argv[1], os.O_RDONLY)
    off = 0
    while off < want:
        b = os.pread(fd, min(1 << 20, want - off), off)
        if not b:
            break
        off += len(b)
    os.close(fd)
    print("done", off, flush=True)
"""


@contextlib.contextmanager
def pod_procs(tmp_path, loader: str, size: int = 8 * MiB):
    """A dozen pods in real cgroups, a process of LOADER in each (ready: it has joined them), and a
    file of SIZE random bytes: (specs, processes, the pod log directory, the file)."""
    v2, v1 = cgroup_roots()
    if v2 is None or set(v1) != set(V1):
        pytest.skip(f"needs cgroup v2 and the v1 hierarchies {V1} mounted (have v2 {v2}, v1 {sorted(v1)})")
    data = tmp_path / "weights.bin"
    data.write_bytes(os.urandom(size))
    logs = tmp_path / "var" / "log" / "pods"
    specs = pod_specs(v2, v1)
    made: list[tuple[str, str]] = []
    procs: list[subprocess.Popen] = []
    try:
        build(specs, str(logs), [v2, *v1.values()], made)
        for p in specs:
            proc = subprocess.Popen(
                [PY, "-c", loader, str(data), *p["cgroups"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            procs.append(proc)
            p["pid"] = proc.pid
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        yield specs, procs, str(logs), str(data)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        left = remove(made)
        assert not left, f"cgroups left behind: {left}"


@pytest.fixture
def pods(tmp_path):
    with pod_procs(tmp_path, LOADER) as got:
        yield got


@pytest.fixture
def loop_pods(tmp_path):
    with pod_procs(tmp_path, LOOP_LOADER) as got:
        yield got


def _trace(args: list[str], out: str):
    err = out + ".err"
    t = subprocess.Popen([*GDSDIAG, "trace", "--json", *args], stdout=open(out, "w"), stderr=open(err, "w"))
    deadline = time.monotonic() + 300
    while "tracing, Ctrl-C to end" not in open(err).read():
        if t.poll() is not None or time.monotonic() > deadline:
            t.kill()
            raise AssertionError(open(err).read())
        time.sleep(0.2)
    return t


def _go_and_stop(t, procs) -> None:
    for proc in procs:  # all at once: a dozen readers of one file
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.stdout.readline().split() == ["done", str(8 * MiB)]
    time.sleep(0.5)  # the last events out of the ring
    t.send_signal(signal.SIGINT)
    assert t.wait(60) in (0, 130)
    _exit(procs)


def _exit(procs) -> None:
    for proc in procs:
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        proc.wait(30)


def _lines(out: str):
    lines = [json.loads(x) for x in open(out) if x.startswith("{")]
    return [x for x in lines if x["type"] == "io"], next(x for x in lines if x["type"] == "summary")


def _interval_pods(out: str) -> dict:
    """pod uid -> (name, bytes per route) added up over the --interval lines (the scale-out view)."""
    got: dict = {}
    for x in (json.loads(x) for x in open(out) if x.startswith("{")):
        if x["type"] == "interval":
            for p in x.get("pods", []):
                name, routes = got.setdefault(p["pod_uid"], (p["pod"], {}))
                for r, n in p["routes"].items():
                    routes[r] = routes.get(r, 0) + n
                assert p["gbps"] is not None and p["gbps"] > 0
    return got


def test_namespace_traces_its_pods_labels_every_row_and_totals_each_pod(pods, tmp_path):
    specs, procs, logs, data = pods
    out = str(tmp_path / "ns.jsonl")
    t = _trace(
        ["--namespace", "llm", "--pod-logs", logs, "--per-io", "--interval", "1", "--path", os.path.dirname(data)], out
    )
    _go_and_stop(t, procs)
    ios, summ = _lines(out)
    llm = {p["pid"]: p for p in specs if p["ns"] == "llm" and p["name"]}
    # (the two nameless pods have no namespace on this node: --namespace cannot pick them)
    assert {v["pid"] for v in ios} == set(llm), "only the llm pods' processes are traced"
    rows = {r["pid"]: r for r in summ["processes"]}
    for pid, p in llm.items():
        r = rows[pid]
        assert (r["container"], r["container_id"], r["runtime"], r["pod_uid"], r["pod"], r["namespace"]) == (
            "loader",
            p["cid"],
            p["runtime"],
            p["uid"],
            p["name"],
            "llm",
        ), (p["cgroups"], r)
        reads = [v for v in ios if v["pid"] == pid]
        assert sum(v["size"] for v in reads) == 8 * MiB and {v["route"] for v in reads} == {"HOST"}
    trees = {t["root"]: t for t in summ["trees"]}
    for pid, p in llm.items():
        assert (trees[pid]["pod"], trees[pid]["namespace"], trees[pid]["container_id"]) == (p["name"], "llm", p["cid"])
    by_pod = {r["pod_uid"]: r for r in summ["pods"]}
    assert set(by_pod) == {p["uid"] for p in llm.values()}
    for p in llm.values():
        r = by_pod[p["uid"]]
        # every pod read the whole file: each is counted its own 8 MiB, though they shared one file
        assert (r["pod"], r["namespace"], r["containers"], r["pids"]) == (p["name"], "llm", [p["cid"]], [p["pid"]])
        assert (r["bytes"], r["routes"], r["ios"]) == (8 * MiB, {"HOST": 8 * MiB}, 8)
    # --interval: each pod's bytes, route mix and GB/s per interval add up to the same
    assert _interval_pods(out) == {p["uid"]: (p["name"], {"HOST": 8 * MiB}) for p in llm.values()}


def test_pod_by_uid_with_no_log_directory_and_kernel_counted_reads(pods, tmp_path):
    specs, procs, logs, data = pods
    nameless = next(p for p in specs if p["name"] is None)
    # by name and namespace first (the processes wait for "go"), in text: the process row is labelled
    named = next(p for p in specs if p["name"] and p["ns"] == "batch")
    r = subprocess.run(
        [*GDSDIAG, "trace", "--pod", named["name"], "--namespace", "batch", "--pod-logs", logs, "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert f"[pod batch/{named['name']}, container loader ({named['cid'][:12]})]" in r.stdout, r.stdout[-2000:]
    out = str(tmp_path / "pod.jsonl")
    # no --per-io: a process without CUDA has its reads counted in the kernel, per file
    t = _trace(["--pod", nameless["uid"], "--pod-logs", logs, "--path", os.path.dirname(data)], out)
    _go_and_stop(t, procs)
    _ios, summ = _lines(out)
    counted = [r for r in summ["host_io_counted"] if r["path"] == data]
    assert {r["pid"] for r in counted} == {nameless["pid"]}
    assert sum(r["bytes"] for r in counted) == 8 * MiB
    (row,) = [r for r in summ["processes"] if r["pid"] == nameless["pid"]]
    # (no pod directory, no container link: the UID and ID only)
    assert (row["pod_uid"], row["pod"], row["namespace"], row["container_id"], row["container"]) == (
        nameless["uid"],
        None,
        None,
        nameless["cid"],
        None,
    )
    assert summ["pods"] == [
        {
            "pod_uid": nameless["uid"],
            "pod": None,
            "namespace": None,
            "containers": [nameless["cid"]],
            "pids": [nameless["pid"]],
            "ios": 8,
            "bytes": 8 * MiB,
            "routes": {"HOST": 8 * MiB},
            # (the file was just written: its pages are in the cache, none added by the reads)
            "page_cache": {"read_bytes": 8 * MiB, "filled_bytes": 0, "hit_share": 1.0},
        }
    ]


def test_unknown_pod_is_one_line_naming_the_pods_there(pods):
    specs, _procs, logs, _data = pods
    r = subprocess.run(
        [*GDSDIAG, "trace", "--pod", "no-such-pod", "--pod-logs", logs, "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 4 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "no running process of pod no-such-pod" in r.stderr
    assert f"llm/{specs[0]['name']}" in r.stderr


def test_exporter_counters_label_every_pod(pods, tmp_path):
    """exporter --trace's counters over the same dozen pods (a trace window of the whole node, as
    the DaemonSet runs it, limited to the data file's directory): one series set per pod, each its
    8 MiB, named as the node names it."""
    from gdsdiag.exporter.collect import TraceCounters
    from gdsdiag.platform.containers import Identities
    from gdsdiag.platform.fsroot import FsRoot
    from gdsdiag.trace.live import run_live

    specs, procs, logs, data = pods
    counters = TraceCounters(ids=Identities(FsRoot("/"), logs))
    counters.new_window()

    def on_status(msg: str) -> None:
        if msg.startswith("tracing"):
            for proc in procs:
                proc.stdin.write("go\n")
                proc.stdin.flush()

    res = run_live(None, None, 6.0, os.path.dirname(data), None, counters, on_status=on_status)
    for row in res.counted:  # (as validate.adapters.trace_window hands them over)
        counters.add_counted(row)
    for proc in procs:
        assert proc.stdout.readline().split() == ["done", str(8 * MiB)]
    _exit(procs)
    per_pod: dict = {}
    for f in counters.families():
        if f.name == "gdsdiag_trace_bytes":
            for s in f.samples:
                k = (s.labels["namespace"], s.labels["pod"], s.labels["container"], s.labels["route"])
                per_pod[k] = per_pod.get(k, 0) + s.value
    want = {
        (
            p["ns"] if p["name"] else "unknown",
            p["name"] or p["uid"],
            "loader" if p["name"] else p["cid"][:12],
            "HOST",
        ): 8 * MiB
        for p in specs
    }
    assert per_pod == want


def test_exporter_names_the_top_pods_by_bytes_and_no_series_goes_down(loop_pods, monkeypatch):
    """exporter --trace --top-pods 4 over the dozen pods, two trace windows as the exporter runs
    them: pods 8-11 read 8 MiB a window, the others 1 MiB. After the first window's bytes the four
    busiest are the named ones; their second window's bytes land in their own series; every series
    only grew between the scrapes; and the series (with the values kept for displaced pods) add up
    to the bytes the programs say they read, none lost or counted twice."""
    import gdsdiag.trace.live as live
    from gdsdiag.exporter.collect import CACHE_KEY, RERANK_S, TraceCounters
    from gdsdiag.platform.containers import Identities
    from gdsdiag.platform.fsroot import FsRoot
    from gdsdiag.validate.adapters import trace_window

    specs, procs, logs, data = loop_pods
    real = live.run_live
    want = {p["pid"]: (8 if i >= 8 else 1) * MiB for i, p in enumerate(specs)}
    now = [0.0]
    counters = TraceCounters(ids=Identities(FsRoot("/"), logs), pod_limit=4, clock=lambda: now[0])
    read = 0
    scrapes = []
    for _window in range(2):

        def on_status(msg: str) -> None:
            if msg.startswith("tracing"):
                for proc in procs:
                    proc.stdin.write(f"go {want[proc.pid]}\n")
                    proc.stdin.flush()

        # (the exporter's own window: trace_window, with the processes told to go once it traces)
        monkeypatch.setattr(live, "run_live", lambda *a, _go=on_status, **k: real(*a, **k, on_status=_go))
        assert trace_window(5.0, os.path.dirname(data), counters) is None
        for proc in procs:
            assert proc.stdout.readline().split() == ["done", str(want[proc.pid])]
            read += want[proc.pid]
        now[0] += RERANK_S  # (a scrape later: re-ranked)
        fam = next(f for f in counters.families() if f.name == "gdsdiag_trace_bytes")
        scrapes.append({(s.labels["route"], s.labels["pod"], s.labels["container"]): s.value for s in fam.samples})
    _exit(procs)
    label = {p["pid"]: p["name"] or p["uid"] for p in specs}
    top = {label[p["pid"]] for p in specs[8:]}
    assert {p[1] for p in counters.pods} == top
    last = scrapes[-1]
    assert {k[1] for k in last} <= top | {"other"}
    for pod in top:  # its second window in its own series (and its first where it had a place then)
        assert sum(v for k, v in last.items() if k[1] == pod) in (8 * MiB, 16 * MiB), (pod, last)
    for k, v in last.items():
        assert v >= scrapes[0].get(k, 0), (k, scrapes[0].get(k), v)
    parked = sum(b for kept in counters.parked.values() for k, (_, b) in kept.items() if k != CACHE_KEY)
    assert sum(last.values()) + parked == read
    # the page-cache counters under the same bounded label sets: every byte was a buffered read of a
    # file just written (in the cache: nothing filled). They come at a window's end, under the label
    # set the pod has then (a pod displaced within the window has its bytes under its own series and
    # its reads here under 'other'): the totals hold, and each top pod has at least its second window
    cache = {pod[1]: v for pod, v in counters.cache.items()}
    assert all(nfilled == 0 for _, nfilled in cache.values()), cache
    kept = sum(kept[CACHE_KEY][0] for kept in counters.parked.values() if CACHE_KEY in kept)
    assert sum(v[0] for v in cache.values()) + kept == read
    for pod in top:
        assert cache[pod][0] in (8 * MiB, 16 * MiB), (pod, cache)


@pytest.fixture
def cold_pods(tmp_path):
    with pod_procs(tmp_path, LOOP_LOADER, 32 * MiB) as got:
        yield got


def test_page_cache_hit_share_first_pod_cold_the_rest_warm(cold_pods, tmp_path):
    """The scale-out view's page-cache hit share: the file's pages dropped, the first pod reads the
    32 MiB file alone (from the disk: every page is added to the cache in its reads), then the other
    eleven read it at once (from the cache). Per pod, the trace's read bytes are what the program
    says it read, the first pod's share is low and the others' high, and the pages the kernel added
    over all pods are about the file (each page once)."""
    specs, procs, logs, data = cold_pods
    size = 32 * MiB
    out = str(tmp_path / "cache.jsonl")
    t = _trace(["--pod-logs", logs, "--interval", "1", "--path", os.path.dirname(data)], out)
    # the file's pages out of the page cache: written back, then dropped (the file's own, not the
    # whole cache's: drop_caches syncs every file system first, which took minutes beside other writers)
    fd = os.open(data, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    first, rest = procs[0], procs[1:]
    first.stdin.write(f"go {size}\n")
    first.stdin.flush()
    assert first.stdout.readline().split() == ["done", str(size)]
    time.sleep(1.5)  # (an interval ends between: the first pod's row is in its own, not cut at ten pods)
    for proc in rest:
        proc.stdin.write(f"go {size}\n")
        proc.stdin.flush()
    for proc in rest:
        assert proc.stdout.readline().split() == ["done", str(size)]
    time.sleep(0.5)
    t.send_signal(signal.SIGINT)
    assert t.wait(60) in (0, 130)
    _exit(procs)
    _ios, summ = _lines(out)
    by_pod = {r["pod_uid"]: r for r in summ["pods"]}
    assert set(by_pod) == {p["uid"] for p in specs}
    shares = {}
    for p in specs:
        pc = by_pod[p["uid"]]["page_cache"]
        assert pc["read_bytes"] == size, (p["uid"], pc)  # what the program read
        shares[p["uid"]] = pc
    cold = shares[specs[0]["uid"]]
    assert cold["hit_share"] < 0.2 and cold["filled_bytes"] >= 0.8 * size, cold
    for p in specs[1:]:
        assert shares[p["uid"]]["hit_share"] > 0.9, (p["uid"], shares[p["uid"]])
    filled = sum(pc["filled_bytes"] for pc in shares.values())
    assert 0.8 * size <= filled <= 1.25 * size, filled
    # the interval lines carry it too: each pod's last row says its share so far (ten pods a line)
    last: dict = {}
    for x in (json.loads(x) for x in open(out) if x.startswith("{")):
        if x["type"] == "interval":
            for p in x.get("pods", []):
                last[p["pod_uid"]] = p["page_cache"]
    assert len(last) >= 10 and specs[0]["uid"] in last
    assert {uid: shares[uid] for uid in last} == last
