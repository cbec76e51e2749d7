"""The fleet view on this kernel with real cgroups: a dozen "pods" built as kubelet and the runtimes
name them (containerd under kubelet's cgroupfs driver on cgroup v1, containerd under its systemd
driver on the cgroup v2 hierarchy, CRI-O under its systemd driver on v1 — the names of
platform/containers.py, each cited there), a /var/log/pods tree under a temporary root, and a real
process in each reading the same file at once. gdsdiag trace --namespace / --pod must trace exactly
those pods' processes and label every process, tree and per-pod total. Needs root, bcc and kernel
headers (skips with the reason otherwise); every cgroup made here is removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import GDSDIAG, LIVE_MARKS

pytestmark = [*LIVE_MARKS, pytest.mark.slow]

MiB = 1 << 20
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
V1 = (
    "pids",
    "cpu",
    "systemd",
)  # v1 hierarchies the pods' processes join (not memory: this sandbox's limit lives there)

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


def _cgroup_roots():
    mounts = [ln.split() for ln in open("/proc/self/mounts")]
    v2 = next((m[1] for m in mounts if m[2] == "cgroup2"), None)
    v1 = {}
    for m in mounts:
        if m[2] == "cgroup":
            for opt in m[3].split(","):
                name = opt.removeprefix("name=")
                if name in V1:
                    v1[name] = m[1]
    return v2, v1


def _pods(v2: str, v1: dict[str, str]) -> list[dict]:
    """Twelve pods: (namespace, name or None for no log directory, uid, container id, runtime, cgroup dirs)."""
    out = []
    kinds = ["containerd-cgroupfs-v1", "containerd-systemd-v2", "crio-systemd-v1"]
    for i in range(12):
        uid, cid = str(uuid.uuid4()), uuid.uuid4().hex + uuid.uuid4().hex
        kind = kinds[i % 3]
        esc = uid.replace("-", "_")
        if kind == "containerd-cgroupfs-v1":  # kubelet cgroupfs: kubepods/<qos>/pod<uid>/<id>
            rel, runtime, dirs = f"kubepods/besteffort/pod{uid}/{cid}", None, [v1[h] for h in V1]
        elif kind == "containerd-systemd-v2":  # kubelet systemd + containerd SystemdCgroup: cri-containerd-<id>.scope
            rel = (
                f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{esc}.slice/cri-containerd-{cid}.scope"
            )
            runtime, dirs = "containerd", [v2]
        else:  # kubelet systemd + CRI-O: crio-<id>.scope
            rel = f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{esc}.slice/crio-{cid}.scope"
            runtime, dirs = "cri-o", [v1[h] for h in V1]
        ns = "llm" if i < 7 else "batch"
        name = None if i in (5, 11) else f"{ns}-loader-{i}"  # two pods the kubelet left no log directory for
        out.append(
            {
                "ns": ns,
                "name": name,
                "uid": uid,
                "cid": cid,
                "runtime": runtime,
                "cgroups": [os.path.join(d, rel) for d in dirs],
            }
        )
    return out


def _rm_tree(path: str, stop: str) -> None:
    """rmdir PATH and its empty parents up to (not including) STOP: cgroups go bottom-up."""
    while path != stop and path.startswith(stop + "/"):
        try:
            os.rmdir(path)
        except OSError:
            return
        path = os.path.dirname(path)


@pytest.fixture
def pods(tmp_path):
    v2, v1 = _cgroup_roots()
    if v2 is None or set(v1) != set(V1):
        pytest.skip(f"needs cgroup v2 and the v1 hierarchies {V1} mounted (have v2 {v2}, v1 {sorted(v1)})")
    data = tmp_path / "weights.bin"
    data.write_bytes(os.urandom(8 * MiB))
    logs = tmp_path / "var" / "log" / "pods"
    specs = _pods(v2, v1)
    made: list[tuple[str, str]] = []
    procs: list[subprocess.Popen] = []
    try:
        for p in specs:
            if p["name"]:
                (logs / f"{p['ns']}_{p['name']}_{p['uid']}" / "loader").mkdir(parents=True)
                links = logs.parent / "containers"  # the kubelet's <pod>_<namespace>_<container>-<id>.log
                links.mkdir(exist_ok=True)
                (links / f"{p['name']}_{p['ns']}_loader-{p['cid']}.log").symlink_to(
                    logs / f"{p['ns']}_{p['name']}_{p['uid']}" / "loader" / "0.log"
                )
            for d in p["cgroups"]:
                os.makedirs(d)
                made.append(
                    (d, v2 if d.startswith(v2 + "/") else next(r for r in v1.values() if d.startswith(r + "/")))
                )
            proc = subprocess.Popen(
                [PY, "-c", LOADER, str(data), *p["cgroups"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            procs.append(proc)
            p["pid"] = proc.pid
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        logs.mkdir(parents=True, exist_ok=True)
        yield specs, procs, str(logs), str(data)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        for d, root in reversed(made):
            _rm_tree(d, root)
        left = [d for d, _ in made if os.path.exists(d)]
        assert not left, f"cgroups left behind: {left}"


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
