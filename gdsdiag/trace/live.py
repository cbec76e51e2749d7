"""A trace session: attach, start or follow the workload, stream verdicts, detach, summarise."""

from __future__ import annotations

import json
import operator
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from ..check.why import untraced_why
from ..errors import GdsdiagError, UsageError
from ..selfexec import module_argv
from . import gcpace
from .cacheshare import CacheShare
from .classify import Classifier, exit_is_io
from .content import ContentCheck, answer_event, recorded_answers
from .events import RECORD_VERSION
from .pods import annotate, pod_rows
from .tally import RouteTally, Unclassified, count_unclassified, merge_unclassified
from .why import NodeMissing

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


_TS = operator.attrgetter("ts")
CHUNK = 1024  # events (or verdicts) handled between two drains of the ring buffers
# After INT/TERM/HUP the events still queued are classified for at most this long, and at most
# STOP_RAW records still undecoded are kept: under a load Python cannot keep up with, the queue can
# hold a million events (a minute of classifying), and the summary must be out within a second.
# What is left is counted (``unclassified_at_stop``), never silently dropped.
# The budgets count from the signal (each phase gets at least its own slice when an earlier one,
# such as a traced program that ignores SIGTERM, took longer), so the summary is out ~0.8 s after it.
STOP_BUDGET_S = 0.35
# (decoding is part of the budget: ~20k records is what 0.3 s classifies on a loaded 2-vCPU VM;
# the records dropped beyond them are counted per process, with their reads and writes and bytes)
STOP_RAW = 20_000
# then the I/Os the classifier holds for evidence still to come (a CUDA copy of their bytes,
# libcufile's call) are decided until this long after the signal, the rest counted per process
STOP_FLUSH_S = 0.55
# and the verdicts made after the signal are printed until this long after it; the rest are in the
# summary's totals (and --record keeps every event)
STOP_PRINT_S = 0.75
STOP_SLICE_S = 0.1  # the least each phase gets
IO_NAMES = frozenset(
    ("pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "read", "write", "readv", "writev")
)


RUN_CHECK = "run gdsdiag check on this node"  # (the fix of every NodeFactsReader.missing)


class NodeFactsReader:
    """`check`'s node facts (check/facts.py) for each file's why, read by `gdsdiag check --json` in
    a child process started with the trace: its reads (kallsyms, sysfs, libcufile's notes) cost the
    tracer no CPU and hold no lock of its (in a thread of the tracer they took 0.5-1.4 s of its CPU on
    the H100's bounce streams). Waited for at most WAIT_S at the end; a check not done by then, or
    failed, leaves the why without the node's side, and the why says so."""

    WAIT_S = 0.5

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        # GDSDIAG_NODE_FACTS_WAIT_S: a loaded machine (a CI box running two suites on 2 cores) can take
        # longer than the program to start Python and read the node; a test that asserts the node's
        # side of the why waits for it instead of racing it. Not a number: the default.
        try:
            self.wait_s = max(0.0, float(os.environ.get("GDSDIAG_NODE_FACTS_WAIT_S", self.WAIT_S)))
        except ValueError:
            self.wait_s = self.WAIT_S
        # why result() gave None, for the why's text (never "a replay" in a trace on the node)
        self.missing = NodeMissing("not read", RUN_CHECK)
        if os.environ.get("GDSDIAG_NODE_FACTS", "1") == "0":  # (benchmarks: the tracer's own cost alone)
            self.missing = NodeMissing("not read: GDSDIAG_NODE_FACTS=0 turned the node's check off", RUN_CHECK)
            return
        try:
            self._proc = subprocess.Popen(
                # (the running gdsdiag, never a gdsdiag/ package in the current directory: selfexec)
                module_argv("gdsdiag", "check", "--json"),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # (the terminal's Ctrl-C is the trace's to handle)
            )
        except OSError as e:
            self._proc = None
            self.missing = NodeMissing(f"not read: gdsdiag check could not start ({e.strerror or e})", RUN_CHECK)

    def abandon(self) -> None:
        """No file needs the node's facts: the check is ended, not waited for."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()

    def result(self):
        from ..bounded import loads_json
        from ..check.context import CheckContext
        from ..check.facts import NodeFacts
        from ..platform.roots import node_root

        p = self._proc
        if p is None:
            return None
        try:
            out, _ = p.communicate(timeout=self.wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.missing = NodeMissing(
                f"not read: gdsdiag check had not answered {self.wait_s:g} s after the trace ended",
                RUN_CHECK,
            )
            return None
        try:
            doc = loads_json(out.decode("utf-8", "replace"))
            with node_root("/") as fs:
                return NodeFacts.from_check_json(doc, CheckContext(fs, env=dict(os.environ)))
        except (ValueError, OSError, GdsdiagError) as e:
            self.missing = NodeMissing(f"not read: gdsdiag check's answer could not be used ({e})", RUN_CHECK)
            return None


def record_answers(record_file, content: ContentCheck, ts: int) -> None:
    """The content checks made since the last call, as recording lines (a replay reads them)."""
    lines = (answer_event(ts, p, off, fs).to_list() for p, off, fs in content.take_answers())
    record_file.write("".join(json.dumps(v) + "\n" for v in lines))


def _tally_events(evs, into: Unclassified, exits: Counter | None = None) -> None:
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


def _processes(clf, counted: list[dict] | None = None, book=None) -> list[dict]:
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


def _finish(clf, counter, tally: RouteTally, **kw) -> TraceResult:
    """The result: per-I/O verdicts plus the host I/O the kernel counted, in one summary."""
    from .counted import add_lost, merge_summary

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
        processes=_processes(clf, rows, book),
        counted=rows,
        lost_by_process=named,
        files=files,
        untraced=untraced_why(clf.node, files),  # (the node's paths host tracing cannot see: check/why.py)
        trees=trees,
        pods=pod_rows(book, tally.by_pid, rows, _cache_now(cache, rows, kw.pop("fills", None), book)),
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


def _cache_now(cache: CacheShare | None, rows: list[dict], fills, book) -> dict | None:
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


def mapped_libraries(pid: int, prefix: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/maps") as f:
            paths = {line.split(None, 5)[5].strip() for line in f if line.count(" ") >= 5 and prefix in line}
    except (OSError, IndexError):
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith(prefix) and not p.endswith(" (deleted)"))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _gate_child(cmd: list[str]):
    """Start CMD held at a pipe so probes are attached and its pid registered before it runs."""
    import shutil

    if shutil.which(cmd[0]) is None and not os.path.exists(cmd[0]):
        raise UsageError(f"command not found: {cmd[0]}", "give the program to trace after --")
    r, w = os.pipe()
    # A shell waits on the pipe and then execs CMD in place: the pid we register is CMD's pid, and
    # nothing of CMD runs before the probes are attached. (A preexec_fn cannot wait: Popen blocks
    # until the child has exec'd.)
    # Only the word "go" opens the gate: if gdsdiag is stopped or killed before the probes are live,
    # the pipe closes, read fails and CMD never runs untraced (exit 125).
    # The pipe is moved to fd 3 in the child: dash accepts only one-digit descriptors in '<&N'.
    gate = 'IFS= read -r word <&3 && [ "$word" = go ] || exit 125; exec 3<&-; exec "$@"'
    # Its own process group (unless gdsdiag is a terminal's foreground job) and a parent-death
    # signal, so the whole tree can be stopped and nothing outlives a killed gdsdiag (tree.py).
    from .tree import Tree, child_setup, foreground_of_terminal

    own_group = not foreground_of_terminal()
    setup = child_setup(own_group, os.getpid())

    def preexec() -> None:
        os.dup2(r, 3)
        setup()

    from ..docout import child_stdout

    # CMD shares the user's stdout (docs/trace.md), not the stderr fd 1 points at in a --json run
    proc = subprocess.Popen(
        ["/bin/sh", "-c", gate, "gdsdiag-trace-gate", *cmd], pass_fds=(3,), preexec_fn=preexec, stdout=child_stdout()
    )
    os.close(r)
    return Tree(proc, own_group), w


@gcpace.streaming()
def run_live(
    cmd: list[str] | None,
    pids: list[int] | None,
    duration: float | None,
    path_filter: str | None,
    libcufile: str | None,
    on_verdict,
    record_file=None,
    block: bool = False,
    cgroup: str | None = None,
    comm: str | None = None,
    on_status=None,
    per_io: bool = False,
    on_end=None,
    on_tick=None,
    on_batch=None,
    pod: str | None = None,
    namespace: str | None = None,
    pod_logs: str = "/var/log/pods",
) -> TraceResult:
    """Trace CMD (held at a gate until the probes are live), the processes PIDS and all their
    descendants, a cgroup, processes named COMM, or (none given) everything. ON_END(result) is
    called as soon as the result is complete, before the probes are detached (which takes the
    kernel seconds): the summary is out while they go. ON_TICK(counted=F) is called after each poll
    (~10 a second) and once more, with final=True, before ON_END (--interval); F() gives the
    kernel's host-I/O counters as rows (counted.CountedIo), read only when the caller asks.
    ON_BATCH() is called after each poll's verdicts were handed out: the printer's output goes out
    then (a pipe's reader gets each poll's lines as they are made, not 8 KiB at a time). An
    ON_VERDICT with a ``many`` method gets them in lists (in order, as one call each would).
    POD (a name or UID) and NAMESPACE trace the processes of those pods running now, and all they
    start (trace/pods.py); POD_LOGS is where the kubelet's pod log directories are seen from here."""
    from ..platform.containers import Identities
    from ..platform.fsroot import FsRoot
    from .bpf import Probes, preflight
    from .pods import PodBook, select
    from .procs import all_procs, by_comm, cgroup_pids, cgroup_target, descendants

    say = on_status or (lambda msg: None)
    t0 = time.monotonic()
    preflight()
    pids = list(pids or [])
    for p in pids:
        if not os.path.exists(f"/proc/{p}"):
            raise UsageError(f"no process {p}", "give the pid of a running process")
    cg = cgroup_target(cgroup) if cgroup else None
    # (the node the trace runs on: its processes' /proc/PID/cgroup and the kubelet's /var/log/pods)
    # (exporter --trace hands over its reader, under its --root and --pod-logs, and takes what the
    # trace read while the processes lived for its labels: a verdict held for evidence, or a kernel
    # counter read at the end, comes after its process may have gone)
    own = getattr(on_verdict, "identities", None)
    book = PodBook(own if isinstance(own, Identities) else Identities(FsRoot("/"), pod_logs))
    share = getattr(on_verdict, "use_identities", None)
    if share is not None:
        share(book.of)
    in_pods: list[int] = []
    if pod is not None or namespace is not None:
        in_pods, found = select(pod, namespace, [p.pid for p in all_procs()], book.ids)
        book.of.update(found)
    say("attaching…")
    tree = None
    gate: int | None = None  # the pipe that holds CMD until the probes are live
    if cmd:
        tree, gate = _gate_child(cmd)
    proc = tree.proc if tree else None
    roots = pids + ([proc.pid] if proc else [])
    if comm:
        roots += by_comm(comm)
    if cg:
        roots += cgroup_pids(cg[2])
    roots += in_pods
    # processes that exist now: every descendant of the given ones (those started later join in the kernel)
    existing = descendants(roots) if roots else []
    selective = bool(cmd or pids or comm or cg or in_pods)
    for p in existing:
        book.add(p)
    # USDT contexts are compiled in: the --libcufile override, else the copy the bindings would load
    # and every other copy the processes already running have mapped
    if libcufile:
        libcufiles = [libcufile]
    else:
        from ..platform.libcufile import locate

        libcufiles = [p for p in [locate().path] if p]
        for p in existing:
            for lib in mapped_libraries(p, "libcufile.so"):
                if not any(_same_file(lib, x) for x in libcufiles):
                    libcufiles.append(lib)
    try:
        probes = Probes(
            libcufiles,
            existing,
            trace_all=not selective,
            block=block,
            cgroup=(cg[0], cg[1]) if cg else None,
            comm=comm,
            cmd=cmd,
            preattach=not libcufile,  # --libcufile: that copy only, as asked
            per_io=per_io,
        )
    except BaseException:
        if tree and gate is not None:
            os.close(gate)  # the gate never opens: the command never runs untraced
            tree.stop(0)
            tree.done()
        raise
    t_attached = time.monotonic()
    # a fork between the /proc walk and the attach is caught by walking again now that the kernel follows
    if selective and roots:
        late = [p for p in descendants(roots) if p not in existing]
        for p in late:
            probes.add_pid(p)
        existing += late
    probes.adopt([p for p in existing if not proc or p != proc.pid])
    for p in existing:
        probes.scan_maps(p)
    header = {
        "libcufile": libcufiles[0] if libcufiles else None,
        "kernel": os.uname().release,
        "probes_attached": probes.attached,
        "probes_not_attached": probes.failed,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cmd": cmd,
        "pids": pids,
        "cgroup": cgroup,
        "comm": comm,
        "pod": pod,
        "namespace": namespace,
    }
    if record_file is not None:
        record_file.write(json.dumps({"gdsdiag_trace_record": RECORD_VERSION, **header}) + "\n")
    from .counted import CountedIo

    clf = Classifier(path_filter)
    if getattr(probes, "major_faults", False):
        clf.major_faults = {}  # (counted: a file with none has 0, not "not counted")
    clf.cgroup_job = bool(cgroup)  # a container's processes are one job, forked from each other or not
    content = ContentCheck(live=True)  # staged copies checked against the files' own bytes
    clf.use_content(content)
    node = NodeFactsReader()  # the node's GDS facts for each file's why, read beside the trace
    counter = CountedIo()
    tally = RouteTally()
    cache = page_cache_share(clf)  # (each pod's page-cache hit share: the verdicts, counters and fills)
    nevents = 0
    stop: dict = {"flag": False, "signum": None}  # flag, the first signal, its time ("t")

    def on_sigint(signum, frame):
        stop["flag"] = True
        if stop["signum"] is None:  # the first signal names the stop (its exit code); later ones only note
            stop["signum"] = signum
            stop["t"] = time.monotonic()

    def counted_now() -> list[dict]:
        """The kernel's host-I/O counters as they stand, named as the summary names them."""
        now = CountedIo()
        now.paths, now.comms, now.counted = counter.paths, counter.comms, probes.counted_host_io()
        return now.rows(clf._path_ok, clf.copied_elsewhere)

    queued: list = []  # events taken but not classified when a stop signal came (oldest first)

    def whole_gate():
        veto, opened, bounce_ok = clf.whole_gate()
        if queued:  # (taken, not fed yet: a stop signal came)
            veto.update(e.pid for e in queued)
            bounce_ok = None
        return veto, opened, bounce_ok

    if record_file is None and os.environ.get("GDSDIAG_WHOLE_CALLS", "1") != "0":
        # (a recording keeps every event: there each call is decoded as before)
        probes.pair_whole_calls(whole_gate)
    unclassified = 0
    unsent: Unclassified = {}  # of those, per process (tally.Unclassified)
    unprinted: list = []  # verdicts made after a stop signal, before the loop ended

    def take(timeout_ms: int, final: bool = False, deadline: float | None = None) -> None:
        """Poll once: record the raw events (if asked) and feed them to the classifier. Once a stop
        signal has come, the rest of a large batch waits for the final call, which works until
        DEADLINE and counts what is left."""
        nonlocal nevents, unclassified
        if deadline is not None:
            unclassified += probes.drop_raw_beyond(STOP_RAW, unsent)
        new = probes.poll(timeout_ms, final)
        pairs, bounces = probes.take_whole(), probes.take_bounce()
        if pairs or bounces:  # (whole calls: decided now; those it cannot, fed with the rest in time order)
            nevents += 2 * (len(pairs) + len(bounces))
            left = clf.feed_whole(pairs, bounces)
            if left:
                nevents -= len(left)
                new = sorted(new + left, key=_TS)
        nevents += len(new)
        # a process that exec'd or mapped a file we do not know as data may have loaded a library:
        # probe any new libcufile / libcuda copy it maps (once per file)
        rescan = set()
        for e in new:
            if e.kind == "open" and e.path and os.path.basename(e.path).startswith(("libcufile.so", "libcuda.so")):
                probes.attach_library(e.path, e.pid)  # as it is opened, before it is mapped
            elif (e.kind == "proc" and e.name == "exec") or (e.kind == "fd" and e.name == "mmap"):
                rescan.add(e.pid)
        for p in rescan:
            probes.scan_maps(p)
        probes.attach_answers()
        evs = queued + new if queued else new
        queued.clear()
        # the ring is emptied into memory (cheap: bytes copied) every CHUNK events of this slower work,
        # so a burst waits in memory instead of overflowing the ring while Python classifies
        for i in range(0, len(evs), CHUNK):
            if deadline is not None and time.monotonic() > deadline:
                # ("bounces": one event standing for two per pair)
                unclassified += sum(2 * len(e.args) if e.kind == "bounces" else 1 for e in evs[i:])
                _tally_events(evs[i:], unsent, probes.exits_counted)
                break
            if stop["flag"] and not final:
                queued.extend(evs[i:])
                break
            part = evs[i : i + CHUNK]
            if record_file is not None:
                record_file.write("".join(json.dumps(e.to_list()) + "\n" for e in part))
            for e in part:
                clf.feed(e)
                counter.feed(e)
            book.see_pids([e.pid for e in part])  # (each process's pod, read while it lives)
            if record_file is not None and content.answers:
                record_answers(record_file, content, part[-1].ts)
            probes.drain()

    # The handlers stay until the probes are gone: a second signal only notes itself, so neither the
    # summary nor the detach is cut short.
    old = {sig: signal.signal(sig, on_sigint) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    many = getattr(on_verdict, "many", None)  # (a printer that takes a poll's verdicts together)

    def hand_out(part: list) -> None:
        """A chunk of verdicts to the printer: together where it takes lists, else one by one."""
        if many is not None:
            many(part)
        else:
            for v in part:
                on_verdict(v)

    t_end = time.monotonic() + duration if duration else None
    exit_code = None
    timing = {"attach_s": round(t_attached - t0, 2), **probes.timing}
    say(f"tracing, Ctrl-C to end (live after {t_attached - t0:.1f} s)")
    try:
        try:
            if proc and gate is not None:
                os.write(gate, b"go\n")
                os.close(gate)
                gate = None
            while not stop["flag"]:
                take(100)
                book.see(clf.procs)  # (each new process's pod, read while it lives)
                clf.advance(0 if stop["flag"] or queued else probes.complete_ns)
                vs = clf.drain()
                for i in range(0, len(vs), CHUNK):
                    part = vs[i : i + CHUNK]
                    tally.add_all(part)
                    cache.add_all(part)
                    if stop["flag"]:
                        unprinted.extend(part)  # (a signal came: printed with the held ones, in the stop's budget)
                    else:
                        hand_out(part)
                    if len(part) == CHUNK:
                        probes.drain()
                if on_batch is not None:
                    on_batch()
                if on_tick is not None:
                    on_tick(
                        counted=counted_now,
                        waiting=lambda: waiting_rows(clf),
                        pods=lambda: book.of,
                        cache=lambda: _cache_now(cache, counted_now(), probes.read_fills(), book),
                    )
                if proc and proc.poll() is not None:
                    exit_code = proc.returncode
                    # the buffers may still hold the last events: the kernel wakes the reader only
                    # now and then, so drain without waiting until a poll brings nothing
                    for _ in range(3):
                        take(20)
                    break
                if (
                    pids
                    and not cmd
                    and not any(os.path.exists(f"/proc/{p}") for p in existing)
                    and not any(os.path.exists(f"/proc/{p}") for p, info in clf.procs.items() if not info.get("exited"))
                ):
                    break  # every followed process has gone, children started later too
                if t_end and time.monotonic() >= t_end:
                    break
        finally:
            # Ctrl-C, TERM, HUP, --duration or an error: the command's whole tree stops with the trace
            # (a command that ended by itself leaves what it started in the background running)
            if tree is not None:
                if gate is not None:
                    os.close(gate)
                if proc is not None and proc.poll() is None:
                    exit_code = tree.stop()
                tree.done()
        # where the end goes, from the signal (or the loop's end) on (startup_s: stop_*_s)
        t_stop = stop.get("t") or time.monotonic()
        phases = {"tree_s": round(time.monotonic() - t_stop, 3)}
        signalled = stop["signum"] is not None

        def until(budget_s: float) -> float | None:
            """A phase's deadline after a signal: BUDGET_S from it, or at least a slice from now."""
            return max(t_stop + budget_s, time.monotonic() + STOP_SLICE_S) if signalled else None

        # what is still in the ring buffers counts too (after a signal: what the budget allows)
        take(0, final=True, deadline=until(STOP_BUDGET_S))
        book.see(clf.procs)
        phases["classify_s"] = round(time.monotonic() - t_stop, 3)
        counted = probes.counted_host_io()
        if record_file is not None:
            record_answers(record_file, content, clf.now)
            record_file.write("".join(json.dumps(e.to_list()) + "\n" for e in counted))
        for e in counted:
            counter.feed(e)
        nevents += len(counted)
        # (the calls whose exit was counted without being classified are not decided again)
        clf.exits_counted(probes.cufile_exits_counted())
        clf.flush(until(STOP_FLUSH_S))
        unclassified += sum(row[0] for row in clf.unclassified.values())
        merge_unclassified(unsent, clf.unclassified)  # (held for evidence the stop cut short: counted)
        phases["flush_s"] = round(time.monotonic() - t_stop, 3)
        print_until = until(STOP_PRINT_S)
        not_printed = 0
        held = clf.drain()
        tally.add_all(held)
        cache.add_all(held)
        # (a chunk at a time, as the loop prints: a trace behind its program makes most of its verdicts
        # here, and one call and one write a line were a twentieth of the tracer's CPU on the H100)
        rest = unprinted + held if unprinted else held
        for i in range(0, len(rest), CHUNK):
            if print_until is not None and time.monotonic() >= print_until:
                not_printed = len(rest) - i
                break
            hand_out(rest[i : i + CHUNK])
        phases["held_printed_s"] = round(time.monotonic() - t_stop, 3)
        if on_tick is not None:
            on_tick(
                final=True,
                counted=counted_now,
                pods=lambda: book.of,
                cache=lambda: _cache_now(cache, counted_now(), probes.read_fills(), book),
            )
        timing["end_s"] = round(time.monotonic() - t_attached, 3)
        # (cumulative from the signal: tree stopped, queue classified, flushed, held verdicts out)
        timing.update({f"stop_{k}": v for k, v in phases.items()})
        # (the processes that mapped libcufile: a file's why names one that never did I/O through it)
        clf.libcufile_pids.update(p for x in probes.libraries if x["kind"] == "libcufile" for p in x["pids"])
        # (waited for only where a file's why needs it: a trace of host I/O alone ends at once)
        if clf.needs_node_facts(any(x["kind"] in ("libcuda", "libcufile") and x["pids"] for x in probes.libraries)):
            clf.node = node.result()
            clf.node_missing = node.missing
        else:
            node.abandon()
        res = _finish(
            clf,
            counter,
            tally,
            attached=probes.attached,
            failed=probes.failed,
            lost=probes.lost,
            events=nevents,
            exit_code=exit_code,
            header=header,
            timing=timing,
            stopped_by=stop["signum"],
            libraries=probes.libraries,
            lost_by_process=probes.lost_by_process(),
            unclassified_at_stop=unclassified,
            unclassified_by_process=unsent,
            verdicts_not_printed=not_printed,
            book=book,
            cache=cache,
            fills=probes.read_fills(),
        )
        if record_file is not None:
            record_file.flush()
        if on_end is not None:
            on_end(res)  # the summary, before the detach
    finally:
        probes.close()  # detach every probe, whatever happened (all at once: detach.py)
        content.close()
        for sig, h in old.items():
            signal.signal(sig, h)
    timing.update({k: v for k, v in probes.timing.items() if k in ("probes", "detach_s")})
    return res


# a replay's verdicts wait this long in event time, and at most this many, to come out in time order:
# longer than any hold of the classifier (the data-flow model's first-copy window, 30 s)
REORDER_NS = 35_000_000_000
REORDER_MAX = 65_536
# A recording is a file from anyone (docs/security.md): it can name millions of processes, threads,
# descriptors and calls that never end, each kept by the classifier (issue 42: a crafted 35.6 MB
# recording took a replay over 3 GiB, where a real one of 2,000,000 events needs 112 MB). So a
# replay follows at most MAX_REPLAY_PROCS processes (the events of later ones are counted as
# unclassified, under pid 0, never classified), and stops with one line once its memory has grown
# by REPLAY_MEMORY, whatever kept it.
MAX_REPLAY_PROCS = 65_536
REPLAY_MEMORY = 512 << 20


@gcpace.streaming()
def _follow(e, followed: set[int]) -> bool:
    """Whether the replay classifies event E: its process (and a forked child) is among the first
    MAX_REPLAY_PROCS the recording names."""
    pids = (e.pid, e.args[1]) if e.kind == "proc" and e.name == "fork" and len(e.args) > 1 else (e.pid,)
    for pid in pids:
        if pid not in followed:
            if len(followed) >= MAX_REPLAY_PROCS:
                return False
            followed.add(pid)
    return True


def _rss() -> int:
    """This process's resident memory in bytes (0 where /proc cannot say)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _within_memory(path: str, base: int, procs: int) -> None:
    grown = _rss() - base
    if base and grown > REPLAY_MEMORY:
        raise GdsdiagError(
            f"{path}: replaying it took more than {REPLAY_MEMORY >> 20} MiB of memory ({procs} processes "
            "followed): its events keep state that never ends (calls, descriptors, reads waiting for a copy)",
            "replay a recording gdsdiag trace --record made; a crafted or damaged one is refused here",
        )


def replay(path: str, path_filter: str | None, on_verdict) -> TraceResult:
    """Classify a recording as the live trace did: events in time order, each verdict handed to
    ON_VERDICT as it is decided. The file is read twice and never held: the first read finds how
    far out of time order its events come (ring buffers of several CPUs, a few ms), the second
    feeds them through a heap of that width (memory: the events of that span, not the recording).
    The verdicts come out in time order through a second, bounded heap (REORDER_NS, REORDER_MAX)."""
    import heapq

    from .counted import CountedIo
    from .events import Recording

    rec = Recording(path)
    header = rec.header
    clf = Classifier(path_filter, int(header.get("gdsdiag_trace_record", 1)))
    if any("page-faults-major" in str(a) for a in header.get("probes_attached") or ()):
        clf.major_faults = {}
    if rec.content_lines:  # (the checks the live trace made: a replay cannot read the node's files)
        clf.use_content(ContentCheck(recorded=recorded_answers(rec.content_events())))
    clf.cgroup_job = bool(header.get("cgroup"))
    counter = CountedIo()
    tally = RouteTally()

    # Verdicts are handed out in time order, as a replay always printed them, though they are
    # decided later than their I/O (a read waits for its copy): each waits in a heap until the
    # recording is REORDER_NS past it, at most REORDER_MAX of them (memory: then the oldest go first).
    ready: list = []
    decided = 0

    def hand_out(final: bool = False) -> None:
        nonlocal decided
        for v in clf.drain():
            if v["path"] is None or clf._path_ok(v["path"]):
                heapq.heappush(ready, (v["ts"], decided, v))
                decided += 1
        horizon = clf.now - REORDER_NS
        while ready and (final or ready[0][0] < horizon or len(ready) > REORDER_MAX):
            v = heapq.heappop(ready)[2]
            tally.add(v)
            on_verdict(v)

    followed: set[int] = set()
    beyond: Unclassified = {}  # the events of processes past MAX_REPLAY_PROCS, all under pid 0
    base = _rss()

    def feed(e) -> None:
        if not _follow(e, followed):
            one: Unclassified = {}
            _tally_events([e], one)
            for row in one.values():  # (its one process's row, counted under pid 0)
                merge_unclassified(beyond, {0: row})
            return
        clf.feed(e)
        counter.feed(e)

    # An event leaves the heap once no later line can come before it in time (the first read's
    # disorder bound): the order fed is exactly the sorted one (ties in file order), as before.
    width = rec.disorder_ns
    heap: list = []
    newest = None
    last = None
    for seq, e in enumerate(rec.events()):
        if newest is None or e.ts > newest:
            newest = e.ts
        heapq.heappush(heap, (e.ts, seq, e))
        while heap and heap[0][0] < newest - width:
            ts, _, first = heapq.heappop(heap)
            if last is not None and ts < last:
                raise GdsdiagError(f"{path} changed while it was replayed", "replay a copy that is not being written")
            last = ts
            feed(first)
        if seq % CHUNK == 0:
            hand_out()
            _within_memory(path, base, len(followed))
    while heap:
        feed(heapq.heappop(heap)[2])
    clf.flush()
    hand_out(final=True)
    return _finish(
        clf,
        counter,
        tally,
        attached=header.get("probes_attached", []),
        failed=header.get("probes_not_attached", []),
        lost=header.get("lost", 0),
        events=rec.count,
        exit_code=None,
        header=header,
        recording_cut_at_line=rec.cut_at,
        on_node=False,
        unclassified_by_process=beyond,
    )
