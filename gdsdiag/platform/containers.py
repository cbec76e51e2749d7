"""Which container and pod a process runs in, from what the node itself holds: the process's
/proc/PID/cgroup (cgroup v1 and v2, kubelet's cgroupfs and systemd drivers, containerd, CRI-O and
Docker naming) and the kubelet's pod log directories /var/log/pods/<namespace>_<name>_<uid> for the
pod's namespace and name. No cluster API token is needed; where nothing on the node says, the
answer is None ("unknown"), never a guess.

The names parsed here, as their writers make them:

- kubelet, pod cgroup: ``kubepods[/<qos>]/pod<uid>`` with the cgroupfs driver and
  ``kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid with - as _>.slice`` with the
  systemd driver (kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux.go: CgroupName.ToSystemd,
  escapeSystemdCgroupName replaces "-" by "_"; ToCgroupfs joins the parts; pkg/kubelet/cm/
  pod_container_manager_linux.go GetPodContainerName: "pod" + uid under the QoS cgroup, none for
  Guaranteed pods).
- containerd's CRI plugin, container cgroup: ``<pod cgroup>/<id>`` (cgroupfs), else the runc
  systemd form ``<slice>:cri-containerd:<id>``, which runc expands to ``cri-containerd-<id>.scope``
  (containerd/containerd getCgroupsPath, pkg/cri/server/helpers_linux.go;
  internal/cri/server/podsandbox/helpers_linux.go in 2.x). A literal ``...slice:cri-containerd:<id>``
  directory is what a kubelet on systemd beside a containerd without SystemdCgroup makes.
- CRI-O: ``<parent>/crio-<id>`` (cgroupfs) and ``<slice>/crio-<id>.scope`` (systemd); its monitor
  sits in ``crio-conmon-<id>.scope`` and is not the container (cri-o/cri-o
  internal/config/cgmgr/cgroupfs_linux.go and systemd_linux.go, CrioPrefix = "crio").
- Docker: ``/docker/<id>`` (cgroupfs) or ``system.slice:docker:<id>``, i.e.
  ``/system.slice/docker-<id>.scope`` (moby/moby cmd/dockerd/daemon_systemd_unix.go
  newCgroupParent); under kubelet with cri-dockerd the pod's cgroup holds ``docker-<id>.scope``.
- kubelet, pod logs: ``/var/log/pods/<namespace>_<name>_<uid>`` (kubernetes/kubernetes
  pkg/kubelet/kuberuntime/helpers.go BuildPodLogsDirectory, logPathDelimiter "_"; namespaces and
  pod names are DNS labels/subdomains, which hold no "_", so the split is unambiguous).
- kubelet, container logs: ``/var/log/containers/<pod>_<namespace>_<container>-<id>.log`` (the same
  file's legacyLogSymlink / logSymlink, kuberuntime_container.go; cut to 255 characters, so a
  name whose id was cut is left out): the container's name for its ID.

A process seen from inside a private cgroup namespace (a DaemonSet pod on cgroup v2) reads paths
relative to its own root ("0::/../../kubepods-…"): the parse looks at the path's components, not
at its start."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .fsroot import FsRoot

POD_LOGS = "/var/log/pods"
CONTAINER_LOGS = "/var/log/containers"  # (beside POD_LOGS: its parent's "containers")

_HEX64 = r"[0-9a-f]{64}"
# the pod's UID: a UUID (36 characters), or for a static pod the 32 hex digits of its config hash
_UID = r"[0-9a-f]{8}(?:-?[0-9a-f]{4}){3}-?[0-9a-f]{12}"
_UID_SYSTEMD = r"[0-9a-f]{8}(?:_?[0-9a-f]{4}){3}_?[0-9a-f]{12}"  # kubelet's systemd names: "-" written "_"
_POD_CGROUPFS = re.compile(rf"^pod({_UID})$")
# (kind's kubelet runs under kubelet.slice: its pods are "kubelet-kubepods-<qos>-pod<uid>.slice")
_POD_SYSTEMD = re.compile(rf"^(?:[a-z0-9_.]+-)?kubepods(?:-[a-z]+)?-pod({_UID_SYSTEMD})\.slice$")
# container directory -> (runtime, id); "cri-containerd-" must be tried before a bare id
_CONTAINER = (
    (re.compile(rf"^cri-containerd-({_HEX64})\.scope$"), "containerd"),
    (re.compile(rf"^.*\.slice:cri-containerd:({_HEX64})$"), "containerd"),
    (re.compile(rf"^crio-({_HEX64})(?:\.scope)?$"), "cri-o"),
    (re.compile(rf"^docker-({_HEX64})\.scope$"), "docker"),
)
_BARE = re.compile(rf"^({_HEX64})$")
_LOG_DIR = re.compile(rf"^([a-z0-9][a-z0-9-]{{0,62}})_([a-z0-9][a-z0-9.-]{{0,252}})_({_UID})$")
_LOG_LINK = re.compile(rf"^[a-z0-9][a-z0-9.-]*_[a-z0-9][a-z0-9-]*_([a-z0-9][a-z0-9-]{{0,62}})-({_HEX64})\.log$")


@dataclass(frozen=True)
class Container:
    """What a process's cgroup path says: None where it says nothing."""

    container_id: str | None = None
    pod_uid: str | None = None
    runtime: str | None = None  # containerd | cri-o | docker; None where the name does not tell
    cgroup: str | None = None  # the path it was read from (the v2 line, else the first v1 line that said)


@dataclass(frozen=True)
class PodName:
    namespace: str
    name: str
    uid: str


def parse_path(path: str) -> Container:
    """A cgroup path (one line's third field) -> container ID, pod UID and runtime, where it says."""
    parts = [p for p in path.split("/") if p and p != ".."]
    pod = cid = runtime = None
    for i, part in enumerate(parts):
        m = _POD_CGROUPFS.match(part)
        if m:
            pod = m.group(1)
            continue
        m = _POD_SYSTEMD.match(part)
        if m:
            pod = m.group(1).replace("_", "-")
            continue
        # (the systemd form of containerd's path holds the pod slice too: "…-pod<uid>.slice:cri-containerd:<id>")
        head, sep, _tail = part.partition(":cri-containerd:")
        if sep:
            m = _POD_SYSTEMD.match(head)
            if m:
                pod = m.group(1).replace("_", "-")
        for rx, rt in _CONTAINER:
            m = rx.match(part)
            if m:
                cid, runtime = m.group(1), rt
                break
        else:
            m = _BARE.match(part)
            if m:
                cid = m.group(1)
                # a bare id: Docker's own "/docker/<id>"; under a pod, containerd or cri-dockerd
                # name it alike (the runtime is not in the name)
                runtime = "docker" if i > 0 and parts[i - 1] == "docker" and pod is None else None
    return Container(cid, pod.lower() if pod else None, runtime, path if (pod or cid) else None)


def parse_cgroup(text: str) -> Container:
    """/proc/PID/cgroup's content -> Container. cgroup v2's line ("0::PATH") first, then the v1
    lines ("ID:CONTROLLERS:PATH") in order: the first that names a pod or container wins (on a
    hybrid node the v2 line of a v1-managed container is often just "/")."""
    v2: list[str] = []
    v1: list[str] = []
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        (v2 if fields[0] == "0" and fields[1] == "" else v1).append(fields[2])
    for path in v2 + v1:
        c = parse_path(path)
        if c.container_id or c.pod_uid:
            return c
    return Container()


def pod_names(fs: FsRoot, pod_logs: str = POD_LOGS) -> dict[str, PodName]:
    """pod UID -> namespace and name, from the kubelet's pod log directories (POD_LOGS, under FS's
    root). A directory that does not parse as <namespace>_<name>_<uid> is left out."""
    out: dict[str, PodName] = {}
    for d in fs.listdir(pod_logs):
        m = _LOG_DIR.match(d)
        if m:
            out[m.group(3)] = PodName(m.group(1), m.group(2), m.group(3))
    return out


def container_names(fs: FsRoot, container_logs: str = CONTAINER_LOGS) -> dict[str, str]:
    """container ID -> its name in the pod spec, from the kubelet's /var/log/containers links."""
    out: dict[str, str] = {}
    for f in fs.listdir(container_logs):
        m = _LOG_LINK.match(f)
        if m:
            out[m.group(2)] = m.group(1)
    return out


@dataclass(frozen=True)
class Identity:
    """A process's container and pod, as the summary rows and exporter labels carry them."""

    container_id: str | None = None
    runtime: str | None = None
    pod_uid: str | None = None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None  # its name in the pod spec

    def as_dict(self) -> dict:
        return {
            "container": self.container,
            "container_id": self.container_id,
            "runtime": self.runtime,
            "pod_uid": self.pod_uid,
            "pod": self.pod,
            "namespace": self.namespace,
        }


class Identities:
    """Processes' containers and pods on one node (FS's root), each read once: /proc/PID/cgroup
    while the process lives, the pod log directories again when a pod UID is not among them yet
    (a pod started since)."""

    MAX = 65_536  # processes remembered (a trace of a busy node sees many short-lived ones)

    def __init__(self, fs: FsRoot, pod_logs: str = POD_LOGS):
        # (POD_LOGS: where the node's /var/log/pods is seen from here; a DaemonSet mounts it from the host)
        self.fs, self.pod_logs = fs, pod_logs
        self.container_logs = os.path.join(os.path.dirname(pod_logs.rstrip("/")) or "/", "containers")
        self._by_pid: dict[int, Identity] = {}
        self._pods: dict[str, PodName] | None = None
        self._names: dict[str, str] | None = None

    def of(self, pid: int) -> Identity:
        got = self._by_pid.get(pid)
        if got is None:
            got = self.read(pid)
            if len(self._by_pid) < self.MAX:
                self._by_pid[pid] = got
        return got

    def read(self, pid: int) -> Identity:
        text = self.fs.read_text(f"/proc/{pid}/cgroup")
        c = parse_cgroup(text or "")
        if not (c.container_id or c.pod_uid):
            return Identity()
        name = self.pod(c.pod_uid) if c.pod_uid else None
        return Identity(
            c.container_id,
            c.runtime,
            c.pod_uid,
            name.name if name else None,
            name.namespace if name else None,
            self.container(c.container_id) if c.container_id and c.pod_uid else None,
        )

    def pod(self, uid: str) -> PodName | None:
        if self._pods is None or uid not in self._pods:
            self._pods = pod_names(self.fs, self.pod_logs)
        return self._pods.get(uid)

    def container(self, cid: str) -> str | None:
        if self._names is None or cid not in self._names:
            self._names = container_names(self.fs, self.container_logs)
        return self._names.get(cid)

    def known(self) -> dict[int, Identity]:
        return dict(self._by_pid)
