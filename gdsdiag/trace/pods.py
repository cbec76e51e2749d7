"""The fleet view of a trace: which container and pod each traced process belongs to (read from
/proc/PID/cgroup while it lives, platform/containers.py), --pod / --namespace resolved to the
processes they name, and the summary's per-pod rows (bytes per route, from each process's verdicts
and kernel counters: a weights file read by a dozen pods is a dozen pods' bytes)."""

from __future__ import annotations

from itertools import islice

from ..errors import UsageError
from ..platform.containers import Identities, Identity

FIELDS = ("container", "container_id", "runtime", "pod_uid", "pod", "namespace")


class PodBook:
    """Each traced process's Identity, read the first time the trace sees it. A process gone before
    it was read (it lived less than a poll) takes its parent's: a fork starts in its parent's cgroup
    (cgroups(7)), and nothing traced moves it."""

    def __init__(self, ids: Identities):
        self.ids = ids
        self.of: dict[int, Identity] = {}
        self._seen = 0  # how many of the classifier's processes were looked at (its dict keeps order)

    def see(self, procs: dict[int, dict]) -> None:
        """Read the processes PROCS (pid -> {ppid, …}, in the order they were added) holds beyond
        those already read: called after every poll, so this costs nothing while none are new."""
        if len(procs) == self._seen:
            return
        for pid in islice(procs, self._seen, None):
            self.add(pid, procs[pid].get("ppid"))
        self._seen = len(procs)

    def see_pids(self, pids) -> None:
        """Read each of PIDS not read yet (the processes of a poll's events: one whose host I/O the
        kernel counts is known to the classifier only by its opens, and its counters come at the end)."""
        of = self.of
        for pid in set(pids):
            if pid not in of:
                self.add(pid)

    def add(self, pid: int, ppid: int | None = None) -> None:
        if pid in self.of:
            return
        got = self.ids.read(pid) if self.ids.fs.exists(f"/proc/{pid}/cgroup") else None
        if got is not None and not (got.pod_uid or got.container_id):
            # An exited process not yet reaped (a zombie) reads "/" in every cgroup v1 hierarchy (seen
            # on this project's 6.18 kernel; v2 keeps its path): it says nothing of where it ran.
            state, parent = _stat(self.ids.fs, pid)
            if state in ("Z", "X"):
                got, ppid = None, parent if ppid is None else ppid
                if ppid is not None and ppid not in self.of and ppid != pid:
                    self.add(ppid)  # (the parent lives on: read it now)
        if got is None and ppid is not None and ppid in self.of:
            got = self.of[ppid]
        self.of[pid] = got or Identity()

    def fields(self, pid: int) -> dict:
        """The row fields of PID: None where nothing on the node says."""
        return (self.of.get(pid) or Identity()).as_dict()


def _stat(fs, pid: int) -> tuple[str | None, int | None]:
    """(state letter, parent pid) from /proc/PID/stat; (None, None) where unreadable."""
    text = fs.read_text(f"/proc/{pid}/stat") or ""
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[1])
    except (IndexError, ValueError):
        return None, None


def annotate(rows: list[dict], book: PodBook | None, key: str = "pid") -> None:
    """Add the identity fields to each row (processes: its pid; trees: the root's)."""
    for r in rows:
        r.update(book.fields(r[key]) if book is not None else dict.fromkeys(FIELDS))


def pod_rows(
    book: PodBook | None, by_pid: dict[tuple[int, str], list[int]], counted: list[dict], cache: dict | None = None
) -> list[dict]:
    """Per pod: its processes and containers, and the I/Os and bytes they moved per route (verdicts
    and the kernel's counters), most bytes first, with its page-cache hit share (CACHE: pod uid ->
    cacheshare.CacheShare.of_pids; None there where its reads did not go through the page cache, or
    nothing measured it: a replay). Processes outside any pod are not in it."""
    if book is None:
        return []
    pods: dict[str, dict] = {}

    def row(pid: int) -> dict | None:
        i = book.of.get(pid)
        if i is None or not i.pod_uid:
            return None
        d = pods.get(i.pod_uid)
        if d is None:
            d = pods[i.pod_uid] = {
                "pod_uid": i.pod_uid,
                "pod": i.pod,
                "namespace": i.namespace,
                "containers": set(),
                "pids": set(),
                "ios": 0,
                "bytes": 0,
                "routes": {},
            }
        d["pids"].add(pid)
        if i.container_id:
            d["containers"].add(i.container_id)
        return d

    for pid in book.of:
        row(pid)
    for (pid, route), (n, nbytes) in by_pid.items():
        d = row(pid)
        if d is not None:
            d["ios"] += n
            d["bytes"] += nbytes
            d["routes"][route] = d["routes"].get(route, 0) + nbytes
    for r in counted:
        if r.get("lost"):
            continue  # (no route: in lost_by_process, under the process)
        d = row(r["pid"])
        if d is not None:
            d["ios"] += r["count"]
            d["bytes"] += r["bytes"]
            d["routes"][r["route"]] = d["routes"].get(r["route"], 0) + r["bytes"]
    out = [
        {
            **d,
            "containers": sorted(d["containers"]),
            "pids": sorted(d["pids"]),
            "page_cache": (cache or {}).get(d["pod_uid"]),
        }
        for d in pods.values()
    ]
    return sorted(out, key=lambda d: (-d["bytes"], d["namespace"] or "", d["pod"] or "", d["pod_uid"]))


def select(
    pod: str | None, namespace: str | None, pids: list[int], ids: Identities
) -> tuple[list[int], dict[int, Identity]]:
    """The processes among PIDS in pod POD (its name or UID) and/or namespace NAMESPACE, and the
    identities read on the way. None there: a usage error that names the pods the node has."""
    found: dict[int, Identity] = {}
    seen: set[tuple[str | None, str | None, str]] = set()
    for pid in pids:
        i = ids.read(pid)
        if not i.pod_uid:
            continue
        seen.add((i.namespace, i.pod, i.pod_uid))
        if pod is not None and pod not in (i.pod, i.pod_uid):
            continue
        if namespace is not None and i.namespace != namespace:
            continue
        found[pid] = i
    if not found:
        what = " ".join(x for x in (f"pod {pod}" if pod else "", f"in namespace {namespace}" if namespace else "") if x)
        # (pods the node names first: a UID alone tells a user less, and they are the ones cut)
        names = [
            f"{ns or '?'}/{name or uid}"
            for ns, name, uid in sorted(seen, key=lambda x: (x[0] is None or x[1] is None, x[0] or "", x[1] or x[2]))
        ]
        have = (
            f"the node's pods with processes: {', '.join(names[:8])}"
            + (f" (+{len(names) - 8} more)" if len(names) > 8 else "")
            if names
            else "no process on this node is in a Kubernetes pod cgroup"
        )
        raise UsageError(
            f"--pod/--namespace: no running process of {what} ({have})",
            "give the pod's name or UID as kubectl get pod -o wide shows it, on the node it runs on"
            + ("" if names else "; names come from /var/log/pods, UIDs from /proc/PID/cgroup"),
        )
    return sorted(found), found
