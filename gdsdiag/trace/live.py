"""gdsdiag trace's two drivers: run_live (a TraceSession, session.py: start, step until the end,
stop, finish) and replay (a recording classified as the live trace did)."""

from __future__ import annotations

import os

from ..errors import GdsdiagError
from . import gcpace
from .model.classify import Classifier
from .model.content import ContentCheck, recorded_answers
from .model.tally import RouteTally, Unclassified, merge_unclassified
from .result import TraceResult, result_of, tally_events
from .session import CHUNK, TraceOptions, TraceSession


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
    session = TraceSession(
        TraceOptions(
            cmd=cmd,
            pids=pids,
            duration=duration,
            path_filter=path_filter,
            libcufile=libcufile,
            record_file=record_file,
            block=block,
            cgroup=cgroup,
            comm=comm,
            per_io=per_io,
            pod=pod,
            namespace=namespace,
            pod_logs=pod_logs,
        ),
        on_verdict,
        on_status=on_status,
        on_tick=on_tick,
        on_batch=on_batch,
    )
    with session.start():  # (left: every probe detached, the signal handlers back, whatever happened)
        session.run()
        session.stop()
        res = session.finish()
        if on_end is not None:
            on_end(res)  # the summary, before the detach
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


def _replay_classifier(rec, path_filter: str | None) -> Classifier:
    """A classifier set up as the live trace that made the recording had it (its record version,
    its probes, the content checks it made: a replay cannot read the node's files)."""
    header = rec.header
    clf = Classifier(path_filter, int(header.get("gdsdiag_trace_record", 1)))
    if any("page-faults-major" in str(a) for a in header.get("probes_attached") or ()):
        clf.major_faults = {}
    if rec.content_lines:
        clf.use_content(ContentCheck(recorded=recorded_answers(rec.content_events())))
    clf.cgroup_job = bool(header.get("cgroup"))
    return clf


def _in_time_order(rec, path: str):
    """The recording's events in time order (ties in file order), and None after every CHUNK lines
    read (where the replay hands out what is decided and checks its memory). An event leaves the
    heap once no later line can come before it in time (the first read's disorder bound), so the
    order is exactly the sorted one, and memory holds the events of that span only."""
    import heapq

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
            yield first
        if seq % CHUNK == 0:
            yield None
    while heap:
        yield heapq.heappop(heap)[2]


class _InTimeOrder:
    """A replay's printer: verdicts handed out in time order, as a replay always printed them,
    though they are decided later than their I/O (a read waits for its copy). Each waits in a heap
    until the recording is REORDER_NS past it, at most REORDER_MAX of them (memory: then the oldest
    go first); only those of files under the path filter (a recording of an older release kept
    others)."""

    def __init__(self, clf: Classifier, on_verdict) -> None:
        self.clf, self.on_verdict = clf, on_verdict
        self.ready: list = []
        self.decided = 0

    def __call__(self, v) -> None:  # (the session hands a printer without many() one at a time)
        self.many([v])

    def many(self, part: list) -> None:
        import heapq

        for v in part:
            if v["path"] is None or self.clf._path_ok(v["path"]):
                heapq.heappush(self.ready, (v["ts"], self.decided, v))
                self.decided += 1
        self.release()

    def release(self, final: bool = False) -> None:
        import heapq

        horizon = self.clf.now - REORDER_NS
        ready = self.ready
        while ready and (final or ready[0][0] < horizon or len(ready) > REORDER_MAX):
            self.on_verdict(heapq.heappop(ready)[2])


def replay(path: str, path_filter: str | None, on_verdict) -> TraceResult:
    """Classify a recording as the live trace did: a TraceSession over offline probes (no program,
    no rings, no library of this node ever probed or loaded: the recording is anyone's file), fed
    the recording's events in time order, each verdict handed to ON_VERDICT in time order
    (_InTimeOrder). The file is read twice and never held: the first read finds how far out of
    time order its events come (ring buffers of several CPUs, a few ms), the second feeds them
    through a heap of that width (memory: the events of that span, not the recording)."""
    from .probes.bpf import Probes
    from .recording import Recording
    from .session import TraceSession

    rec = Recording(path)
    header = rec.header
    clf = _replay_classifier(rec, path_filter)
    probes = Probes.offline()
    newest = [0]
    probes.clock = lambda: newest[0]  # (the probes' clock is the recording's)
    # (no hold for order: _in_time_order has ordered the events. A hold would keep a crafted
    # recording's events -- all of one timestamp -- out of the classifier until the end, past the
    # memory check below)
    probes.REORDER_NS = 0
    tally = RouteTally()  # (the verdicts printed: those of files under the filter, as they come out)

    def counted(v) -> None:
        tally.add(v)
        on_verdict(v)

    ordered = _InTimeOrder(clf, counted)
    session = TraceSession.over(probes, clf, ordered)

    followed: set[int] = set()
    beyond: Unclassified = {}  # the events of processes past MAX_REPLAY_PROCS, all under pid 0
    base = _rss()
    batch: list = []
    for e in _in_time_order(rec, path):
        if e is not None:
            if _follow(e, followed):
                batch.append(e)
                newest[0] = e.ts
            else:
                one: Unclassified = {}
                tally_events([e], one)
                for row in one.values():  # (its one process's row, counted under pid 0)
                    merge_unclassified(beyond, {0: row})
            continue
        probes.give_events(batch)
        batch = []
        session.step(0)
        _within_memory(path, base, len(followed))
    probes.give_events(batch)
    session.step(0, final=True)
    _within_memory(path, base, len(followed))
    clf.flush()
    ordered.many(clf.drain())
    ordered.release(final=True)
    return result_of(
        clf,
        session.counter,
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
