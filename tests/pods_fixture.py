"""Kubernetes "pods" on this machine, in real cgroups, named exactly as kubelet and the runtimes name
them (the forms of gdsdiag/platform/containers.py, each cited there), with the kubelet's
/var/log/pods/<namespace>_<name>_<uid>/<container> directories and /var/log/containers/
<pod>_<namespace>_<container>-<id>.log links under a directory of the caller's. Used by the live
tests (tests/test_trace_pods_live.py, tests/test_trace_cache_live.py) and by the GPU machine's
two-pod script (tests/workloads/gpu_pods_run.sh, through the command line below):

    python3 tests/pods_fixture.py make DIR N     # N pods, their log tree under DIR/var/log; DIR/pods.json
    python3 tests/pods_fixture.py rm DIR         # removes the cgroups DIR/pods.json names

A process joins its pod by writing its pid to cgroup.procs of each directory in the pod's
"cgroups" (tests/workloads/pod_join.sh, or the loaders' own first lines)."""

from __future__ import annotations

import json
import os
import sys
import uuid

# v1 hierarchies the pods' processes join (not memory: this sandbox's limit lives there)
V1 = ("pids", "cpu", "systemd")
# Where there are v1 hierarchies (this VM: a hybrid), the pods alternate between the three forms;
# a v2-only host (Ubuntu 24.04, the GPU machine) gets the v2 forms of each driver and runtime.
HYBRID_KINDS = ("containerd-cgroupfs-v1", "containerd-systemd-v2", "crio-systemd-v1")
V2_KINDS = ("containerd-cgroupfs-v2", "containerd-systemd-v2", "crio-systemd-v2")


def cgroup_roots() -> tuple[str | None, dict[str, str]]:
    """(the cgroup2 mount, {v1 hierarchy name: its mount}) of this machine."""
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


def kinds_here(v2: str | None, v1: dict[str, str]) -> tuple[str, ...] | None:
    """The cgroup forms this machine can hold, or None (no cgroup2 mount)."""
    if v2 is None:
        return None
    return HYBRID_KINDS if set(v1) == set(V1) else V2_KINDS


def specs(v2: str, v1: dict[str, str], n: int = 12, kinds: tuple[str, ...] | None = None) -> list[dict]:
    """N pods: namespace, name (None: no log directory), uid, container id, runtime, cgroup dirs.
    Namespace llm for the first 7 of 12 (batch after), pods 5 and 11 left without a log directory."""
    kinds = kinds or kinds_here(v2, v1) or V2_KINDS
    out = []
    for i in range(n):
        uid, cid = str(uuid.uuid4()), uuid.uuid4().hex + uuid.uuid4().hex
        kind = kinds[i % len(kinds)]
        esc = uid.replace("-", "_")
        hier = [v1[h] for h in V1] if kind.endswith("-v1") else [v2]
        if kind.startswith("containerd-cgroupfs"):  # kubelet cgroupfs: kubepods/<qos>/pod<uid>/<id>
            rel, runtime = f"kubepods/besteffort/pod{uid}/{cid}", None
        elif kind.startswith("containerd-systemd"):  # kubelet systemd + containerd SystemdCgroup
            rel = (
                f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{esc}.slice/cri-containerd-{cid}.scope"
            )
            runtime = "containerd"
        else:  # kubelet systemd + CRI-O: crio-<id>.scope
            rel = f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{esc}.slice/crio-{cid}.scope"
            runtime = "cri-o"
        ns = "llm" if i < 7 else "batch"
        name = None if i in (5, 11) else f"{ns}-loader-{i}"
        out.append(
            {
                "ns": ns,
                "name": name,
                "uid": uid,
                "cid": cid,
                "runtime": runtime,
                "kind": kind,
                "cgroups": [os.path.join(d, rel) for d in hier],
            }
        )
    return out


def build(pods: list[dict], logs: str, roots: list[str], made: list[tuple[str, str]] | None = None) -> list:
    """Make each pod's cgroups and its log directory and container link under LOGS (…/var/log/pods).
    Returns MADE with (cgroup dir, the hierarchy's mount) added for each, for remove() (pass it in:
    what was made before a failure is in it)."""
    made = [] if made is None else made
    os.makedirs(logs, exist_ok=True)
    links = os.path.join(os.path.dirname(logs), "containers")
    os.makedirs(links, exist_ok=True)
    for p in pods:
        if p["name"]:
            d = os.path.join(logs, f"{p['ns']}_{p['name']}_{p['uid']}", "loader")
            os.makedirs(d)
            os.symlink(os.path.join(d, "0.log"), os.path.join(links, f"{p['name']}_{p['ns']}_loader-{p['cid']}.log"))
        for d in p["cgroups"]:
            os.makedirs(d)
            made.append((d, next(r for r in roots if d.startswith(r.rstrip("/") + "/"))))
    return made


def rm_tree(path: str, stop: str) -> None:
    """rmdir PATH and its empty parents up to (not including) STOP: cgroups go bottom-up."""
    stop = stop.rstrip("/")
    while path != stop and path.startswith(stop + "/"):
        try:
            os.rmdir(path)
        except OSError:
            return
        path = os.path.dirname(path)


def remove(made: list[tuple[str, str]]) -> list[str]:
    """Remove the cgroups BUILD made (their processes gone); the ones left (still busy)."""
    for d, root in reversed(made):
        rm_tree(d, root)
    return [d for d, _ in made if os.path.exists(d)]


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "make":
        v2, v1 = cgroup_roots()
        if v2 is None:
            print("no cgroup2 mount: cannot make pods here", file=sys.stderr)
            return 3
        top = argv[1]
        pods = specs(v2, v1, int(argv[2]))
        made = build(pods, os.path.join(top, "var", "log", "pods"), [v2, *v1.values()])
        with open(os.path.join(top, "pods.json"), "w") as f:
            json.dump({"pods": pods, "made": made, "logs": os.path.join(top, "var", "log", "pods")}, f, indent=1)
        print(os.path.join(top, "pods.json"))
        return 0
    if len(argv) == 2 and argv[0] == "rm":
        with open(os.path.join(argv[1], "pods.json")) as f:
            left = remove([tuple(x) for x in json.load(f)["made"]])
        if left:
            print(f"cgroups left behind (busy): {left}", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 4


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
