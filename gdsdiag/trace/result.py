"""The result of a trace, live or replayed: the verdicts' totals, the host I/O the kernel counted,
and the per-process, per-file, per-tree and per-pod books (TraceResult, made by ``finish``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from ..check.why import untraced_why
from .model.cacheshare import CacheShare
from .model.classify import exit_is_io
from .model.tally import RouteTally, Unclassified, count_unclassified, merge_unclassified
from .pods import annotate, pod_rows

if TYPE_CHECKING:
    from collections import Counter

    from ..schema import trace as schema


@dataclass
class TraceResult:
    ios: int  # verdicts decided (each was handed out as it came; none is kept)
    summary: dict
    attached: list[str]
    failed: list[str]
    lost: int
    events: int
    exit_code: int | None = None
    header: dict = field(default_factory=dict)
    processes: list[dict] = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    libraries: list[dict] = field(default_factory=list)
    stopped_by: int | None = None  # the signal (INT/TERM/HUP) that ended a live trace early
    counted: list[dict] = field(default_factory=list)  # host I/O counted in the kernel (counted.py)
    files: list[dict] = field(default_factory=list)  # per file: bytes per route and why (Classifier.file_summary)
    trees: list[dict] = field(default_factory=list)  # per traced process tree (Classifier.tree_summary)
    block: list[dict] = field(default_factory=list)  # --block: per device and direction (Classifier.block_summary)
    pods: list[dict] = field(default_factory=list)  # per Kubernetes pod: bytes per route (trace/pods.py)
    # pid -> (bytes its reads returned through the page cache, bytes added to it in them): cacheshare.py
    page_cache_by_pid: dict = field(default_factory=dict)
    lost_by_process: list[dict] = field(default_factory=list)  # events the kernel dropped, per process
    recording_cut_at_line: int | None = None  # --replay: the recording's last line, cut as it was written, left out
    unclassified_at_stop: int = 0  # events queued and I/Os held for evidence a signal cut short (STOP_*_S)
    unclassified_by_process: list[dict] = field(default_factory=list)  # the same per process, their I/Os and bytes
    verdicts_not_printed: int = 0  # held verdicts past STOP_PRINT_S after a signal (in the totals)
    untraced: dict | None = None  # the node's paths host tracing cannot see, and what was seen (check/why.py)

    def ios_lost(self) -> tuple[int, int]:
        """Reads and writes whose record the kernel could not send (ring full), and their bytes:
        counted there, so the totals stay exact; they have no route (those of a data file are in
        host_io_counted under it too, lost: counted.add_lost)."""
        return (
            sum(r.get("ios", 0) for r in self.lost_by_process),
            sum(r.get("bytes", 0) for r in self.lost_by_process),
        )

    def ios_counted(self) -> int:
        """The host I/O the kernel counted instead of sending (the lost counters are in ios_lost)."""
        return sum(r["count"] for r in self.counted if not r.get("lost"))

    def summary_json(self) -> schema.Summary:
        return {
            "type": "summary",
            "routes": self.summary,
            "ios": self.ios
            + self.ios_counted()
            + self.ios_lost()[0]
            + sum(r["ios"] for r in self.unclassified_by_process),
            "ios_counted_in_kernel": self.ios_counted(),
            "ios_lost_in_kernel": self.ios_lost()[0],
            "bytes_lost_in_kernel": self.ios_lost()[1],
            "host_io_counted": cast("list[schema.CountedRow]", self.counted),
            "events": self.events,
            "lost_events": self.lost,
            "lost_by_process": cast("list[schema.LostRow]", self.lost_by_process),
            "unclassified_at_stop": self.unclassified_at_stop,
            "recording_cut_at_line": self.recording_cut_at_line,
            "unclassified_by_process": cast("list[schema.LostRow]", self.unclassified_by_process),
            "verdicts_not_printed": self.verdicts_not_printed,
            "probes_attached": self.attached,
            "probes_not_attached": self.failed,
            "traced_exit_code": self.exit_code,
            "processes": cast("list[schema.Process]", self.processes),
            "libraries": cast("list[schema.Library]", self.libraries),
            "startup_s": self.timing,
            "files": cast("list[schema.FileRow]", self.files),
            "trees": cast("list[schema.TreeRow]", self.trees),
            "block": cast("list[schema.BlockRow]", self.block),
            "pods": cast("list[schema.PodRow]", self.pods),
            "untraced": cast("schema.Untraced | None", self.untraced),
        }


IO_NAMES = frozenset(
    ("pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "read", "write", "readv", "writev")
)


def tally_events(evs, into: Unclassified, exits: Counter | None = None) -> None:
    """Per process (tally.Unclassified, as bpf.tally_records does for undecoded records): events,
    the reads and writes among them with their bytes, and of those the reads (not classified);
    into EXITS, per (pid, tid), the cuFile exits counted as I/Os (Classifier.exits_counted)."""
    for e in evs:
        if e.kind == "bounces":  # (one process's bounce pairs: each a read and its copy)
            for _, pr in e.args:
                count_unclassified(into, e.pid, 2, 1, max(pr[10], 0), read=True)
            continue
        if e.kind == "sys_exit" and e.name in IO_NAMES:
            count_unclassified(into, e.pid, 1, 1, max(e.args[5], 0), read=e.name.startswith(("pread", "read")))
        elif e.kind == "api_exit" and exit_is_io(e.name, e.args):
            # the call is the I/O (its own thread's pread64/pwrite64 ride in this record: version 4)
            count_unclassified(into, e.pid, 1, 1, max(e.args[0], 0), read=e.name == "cuFileRead")
            if exits is not None:
                exits[(e.pid, e.tid)] += 1
        else:
            count_unclassified(into, e.pid)


def process_rows(clf, counted: list[dict] | None = None, book=None) -> list[dict]:
    extra: dict[int, int] = {}
    for r in counted or []:
        extra[r["pid"]] = extra.get(r["pid"], 0) + r["count"]
    out = []
    for p in sorted(clf.procs.values(), key=lambda p: p["pid"]):
        d = {k: p.get(k) for k in ("pid", "ppid", "comm", "exe", "ios")}
        d["ios"] = (d["ios"] or 0) + extra.get(p["pid"], 0)
        if p.get("threads"):
            d["threads"] = p["threads"]  # (threads it started during the trace: not processes)
        if clf.said.get(p["pid"]):
            d["said"] = list(clf.said[p["pid"]])  # (its stderr lines that name the data path)
        out.append(d)
    annotate(out, book)  # (its container and pod; None where nothing on the node says: a replay)
    return out


def _block_name(major: int, minor: int) -> str | None:
    """A block device's name on this node (/sys/dev/block/MAJ:MIN/uevent DEVNAME); None if not here."""
    try:
        with open(f"/sys/dev/block/{major}:{minor}/uevent") as f:
            for line in f.read(4096).splitlines():
                if line.startswith("DEVNAME="):
                    return line.split("=", 1)[1][:64]
    except OSError:
        pass
    return None


def result_of(clf, counter, tally: RouteTally, **kw) -> TraceResult:
    """The result: per-I/O verdicts plus the host I/O the kernel counted, in one summary."""
    from .model.counted import add_lost, merge_summary

    rows = counter.rows(clf._path_ok, clf.copied_elsewhere)
    book = kw.pop("book", None)
    cache = kw.pop("cache", None)
    if book is not None:
        for r in rows:  # (host I/O the kernel counted, of processes the classifier never saw)
            book.add(r["pid"])
    summary = tally.summary()
    merge_summary(summary, rows)
    clf.add_counted(rows)  # (the per-file and per-tree books hold what the route totals hold)
    lost = kw.pop("lost_by_process", [])
    unsent = kw.pop("unclassified_by_process", {})
    merge_unclassified(unsent, clf.unmatched)  # (cuFile calls whose start the trace did not see)
    kw["unclassified_by_process"] = [
        {"pid": pid, "comm": _comm(clf, pid), "events": n, "ios": ios, "bytes": nbytes, "reads": rd, "read_bytes": rb}
        for pid, (n, ios, nbytes, rd, rb) in sorted(unsent.items(), key=lambda x: (-x[1][0], x[0]))
    ]
    named = [
        {"pid": r["pid"], "comm": _comm(clf, r["pid"]), **{k: v for k, v in r.items() if k != "pid"}}
        for r in add_lost(lost, rows)
    ]
    trees = clf.tree_summary()
    annotate(trees, book, "root")  # (a tree's pod is its root's: a fork starts in its parent's cgroup)
    files = clf.file_summary()
    return TraceResult(
        tally.ios,
        summary,
        processes=process_rows(clf, rows, book),
        counted=rows,
        lost_by_process=named,
        files=files,
        untraced=untraced_why(clf.node, files),  # (the node's paths host tracing cannot see: check/why.py)
        trees=trees,
        pods=pod_rows(book, tally.by_pid, rows, cache_now(cache, rows, kw.pop("fills", None), book)),
        page_cache_by_pid=cache.by_pid() if cache is not None else {},
        # (a replay's devices are another node's: named only on the node itself)
        block=clf.block_summary(_block_name if kw.pop("on_node", True) else None),
        **kw,
    )


def page_cache_share(clf) -> CacheShare:
    """Each pod's page-cache hit share (cacheshare.py) over the files the trace counts: under its
    path filter, not opened O_DIRECT every time, named by their inode as the classifier knows it."""

    def keep(path: str) -> bool:
        direct, opens = clf._opens(path, None)
        return clf._path_ok(path) and not (opens and direct == opens)

    return CacheShare(keep, lambda dev, ino: clf.inodes.get((dev, ino)))


def cache_now(cache: CacheShare | None, rows: list[dict], fills, book) -> dict | None:
    """pod uid -> its page-cache share, the kernel's counters and fills as they stand (None: no
    cache share kept, as in a replay, whose recording holds no fills)."""
    if cache is None or book is None:
        return None
    cache.set_counted(rows)
    cache.set_fills(fills)
    return cache.per_pod(book.of)


def waiting_rows(clf) -> list[dict]:
    """The I/Os the classifier has not decided yet, per process, named (the live views' "waiting
    for evidence")."""
    return [{"pid": pid, "comm": _comm(clf, pid), "ios": n, "bytes": b} for pid, (n, b) in clf.waiting().items()]


def _comm(clf, pid: int) -> str | None:
    """The name of a process the trace followed, or as /proc has it now."""
    info = clf.procs.get(pid)
    if info and info.get("comm"):
        return info["comm"]
    from .procs import describe

    d = describe(pid)
    return d.comm if d else None
