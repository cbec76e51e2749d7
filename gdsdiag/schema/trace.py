"""``gdsdiag trace --json`` (docs/json.md): JSON lines, one ``io`` object per I/O, then one
``summary``. The io line is the classifier's verdict itself: ``trace.model.classify`` builds each I/O's
verdict as an ``IoLine`` and ``--json`` writes it as it is (the one definition of its fields); the
summary is built in ``trace.result.TraceResult.summary_json`` with this type."""

from __future__ import annotations

from typing import TypedDict

from .check import WhyFact


class IoLine(TypedDict):
    """One I/O's route verdict (trace.model.classify)."""

    type: str  # "io"
    ts: int  # ns, CLOCK_MONOTONIC (the probes' clock)
    pid: int
    tid: int
    comm: str
    api: str  # cuFileRead … or the syscall name for application I/O
    op: str  # read | write
    path: str | None
    offset: int
    size: int
    ret: int | None
    latency_ns: int | None
    route: str  # a routes.Route (a str enum)
    subtype: str | None
    confidence: str  # high | medium | low
    evidence: list[str]


class _RouteStats(TypedDict):
    count: int
    bytes: int
    subtypes: list[str]
    p50_us: float | None
    p99_us: float | None
    hist_us: list[list[int]]


class RouteStats(_RouteStats, total=False):
    counted_in_kernel: int  # HOST (or UNKNOWN), when host I/O was counted in the kernel (trace/model/counted.py)
    lost_in_kernel: int  # UNKNOWN: of those, I/Os with no per-I/O detail (their records dropped, ring full)


class _CountedRow(TypedDict):
    """One kernel counter: host I/O of a process without CUDA, per (process, file, syscall, size class)."""

    pid: int
    comm: str
    api: str
    op: str
    path: str
    size_class: str
    count: int
    bytes: int
    errors: int
    mean_latency_us: float | None
    route: str  # HOST; UNKNOWN where its job copied host memory no traced read explains


class CountedRow(_CountedRow, total=False):
    why: str  # (UNKNOWN only) that copy, and why the route cannot be told
    renamed_from: str  # the path the file was opened by, where renamed since (path: its last name)
    lost: bool  # its records were dropped (ring full) in a process that may copy to a GPU: UNKNOWN, no per-I/O detail


class _Identity(TypedDict):
    """A process's container and pod, as the node holds them (platform/containers.py): from its
    /proc/PID/cgroup and the kubelet's /var/log/pods/<namespace>_<name>_<uid>; None where nothing
    says (a host process; a replay, whose recording holds none; a pod with no log directory: name
    and namespace None, UID known)."""

    container: str | None  # its name in the pod spec (/var/log/containers)
    container_id: str | None  # 64 hex digits
    runtime: str | None  # containerd | cri-o | docker; None where the cgroup name does not tell
    pod_uid: str | None
    pod: str | None
    namespace: str | None


class _Process(_Identity):
    pid: int
    ppid: int | None
    comm: str | None
    exe: str | None
    ios: int | None


class Process(_Process, total=False):
    threads: int  # threads it started during the trace (listed under it, not as processes)
    said: list[str]  # what it wrote to stderr that names the data path (trace/model/said.py), its first lines


class Library(TypedDict):
    path: str
    kind: str
    usdt: int
    uprobes: int
    pids: list[int]


class _FileRow(TypedDict):
    """One file's bytes in the trace, per route, and why (trace.model.classify.Classifier.file_summary)."""

    path: str
    ios: int
    bytes: int  # the sizes of its I/O lines added up (a range really read twice counts twice)
    extent: int  # the highest file offset reached
    routes: dict[str, int]  # route -> bytes
    to_gpu_share: float  # bytes that reached a GPU (DRAM_BOUNCE, COMPAT, P2P routes) / bytes
    p2p_share: float
    page_cache_hit: float | None  # of its mapped bytes, the share that came from the page cache
    # major page faults in its mappings (perf event page-faults-major, the kernel's count ru_majflt
    # sums) and per GiB of the bytes its mappings brought in; None: not counted, or not mapped
    major_faults: int | None
    major_faults_per_gib: float | None
    via: list[str]  # read, pread64, mmap, cuFile, io_uring, …
    pids: list[int]
    how: list[str]  # direct | staged | job: how copies took its bytes (dataflow.py)
    mechanism: str  # what the program did to it: "io_uring, O_DIRECT, 8 threads" (trace/model/mechanism.py)
    threads: int  # threads seen doing its I/O (0: only counted in the kernel)
    via_to_gpu: list[str]  # of via, the calls that moved the bytes that reached a GPU
    gbps: float | None  # its bytes over the span of its I/O (first start to last end); None: not known
    # what the node's hardware allows on its path (platform/ceiling.py: the disk's PCIe link, the
    # GPU's where its bytes reached one, the queue limits): {gbps (the narrowest known, None: unknown),
    # limit, ceilings: [{whose, gbps, what, at, source}], queue}; None: the node not read (a replay)
    ceiling: dict | None
    against_ceiling: str | None  # "1.24 GB/s of the GPU's 63.02 GB/s PCIe Gen5 x16 link (…)"; None: no gbps
    why: str
    # the facts that decided its route, decisive first: {fact, value, source, role: decisive |
    # contributing} (check/why.py, the node's from check/facts.py), and the one change that would
    # move its bytes to a better route ("none on this node: …", "none needed")
    why_chain: list[dict]
    fix: str


class FileRow(_FileRow, total=False):
    renamed_from: list[str]  # the names its bytes were written or read under before a rename (path: the last)
    lost_in_kernel: dict[str, int]  # {ios, bytes} of its UNKNOWN with no per-I/O detail (records dropped, ring full)


class BlockRow(TypedDict):
    """--block: the block requests the traced processes issued to one device in one direction."""

    device: str  # major:minor
    name: str | None  # its name on the live node (vda, nvme0n1); None in a replay or where not found
    op: str  # the request's rwbs letter: R read, W write, D discard, F flush
    requests: int
    bytes: int


class TreeRow(_Identity):
    """One traced process tree (job): the bytes of its files on each route; its container and pod
    are its root process's."""

    root: int
    comm: str | None
    pids: list[int]
    routes: dict[str, int]


class PageCache(TypedDict):
    """A pod's page-cache hit share (trace/model/cacheshare.py): of the bytes its reads of data files
    returned (not O_DIRECT, not cuFile, not mmap), the share the kernel did not add to the cache."""

    read_bytes: int
    filled_bytes: int | None  # pages added to the page cache in those reads; None: not readable
    hit_share: float | None  # 1 - filled / read, at least 0; None: not known


class PodRow(TypedDict):
    """One Kubernetes pod's processes in the trace and what they moved (trace/pods.py), most bytes first."""

    pod_uid: str
    pod: str | None  # None: no /var/log/pods directory names it
    namespace: str | None
    containers: list[str]
    pids: list[int]
    ios: int  # its processes' I/O verdicts and the host I/O the kernel counted for them
    bytes: int
    routes: dict[str, int]  # route -> bytes
    page_cache: PageCache | None  # None: none of its reads went through the page cache (or a replay)


class LostRow(TypedDict, total=False):
    pid: int
    comm: str | None
    lost: int
    ios: int  # reads and writes among the lost events (counted in the kernel)
    bytes: int  # the bytes those moved
    events: int  # (unclassified_by_process: the events not classified)
    reads: int  # of ios, the reads (the rest are writes)
    read_bytes: int
    in_files: int  # of ios, those counted under their file (host_io_counted rows with lost)


class Untraced(TypedDict):
    """The node's paths host tracing cannot see (check/why.py untraced_why): what the trace saw reach a
    GPU from files, then the paths, and how to verify."""

    seen_to_gpu_bytes: int
    why_chain: list[WhyFact]
    fix: str


class Summary(TypedDict):
    type: str  # "summary"
    routes: dict[str, RouteStats]
    ios: int
    ios_counted_in_kernel: int
    ios_lost_in_kernel: int
    bytes_lost_in_kernel: int
    host_io_counted: list[CountedRow]
    events: int
    lost_events: int
    lost_by_process: list[LostRow]
    unclassified_at_stop: int
    recording_cut_at_line: int | None
    unclassified_by_process: list[LostRow]
    verdicts_not_printed: int
    probes_attached: list[str]
    probes_not_attached: list[str]
    traced_exit_code: int | None
    processes: list[Process]
    libraries: list[Library]
    startup_s: dict[str, float]
    files: list[FileRow]
    trees: list[TreeRow]
    block: list[BlockRow]
    pods: list[PodRow]
    untraced: Untraced | None  # null where the node has no such path, or its facts are not known


class _IntervalStats(TypedDict):
    count: int
    bytes: int
    gbps: float | None
    p50_us: float | None
    p99_us: float | None


class _IoSpan(TypedDict, total=False):
    # the span its I/Os took, when longer than the interval (verdicts held for their evidence and
    # decided together): gbps is bytes over it
    io_span_s: float


class IntervalStats(_IntervalStats, _IoSpan, total=False):
    counted_in_kernel: int  # HOST: I/Os the kernel counted in this interval (no latencies)


class IntervalRow(_IntervalStats, _IoSpan):
    pid: int
    comm: str
    path: str | None
    route: str


class WaitingRow(TypedDict):
    pid: int
    comm: str | None
    ios: int
    bytes: int


class Waiting(TypedDict):
    """The I/Os not decided at an interval's end (Classifier.waiting): their evidence may still come."""

    ios: int
    bytes: int
    by_process: list[WaitingRow]  # most bytes first, at most ten


class _Interval(TypedDict):
    type: str  # "interval"
    t_s: float  # seconds since the trace went live, at the interval's end
    interval_s: float
    routes: dict[str, IntervalStats]
    top: list[IntervalRow]  # the busiest (process, file, route) rows, most bytes first
    rows_left_out: int


class _IntervalPod(TypedDict):
    pod_uid: str
    pod: str | None
    namespace: str | None
    count: int
    bytes: int
    gbps: float | None
    routes: dict[str, int]  # route -> bytes


class _PodExtras(TypedDict, total=False):
    page_cache: PageCache | None  # live: its page-cache hit share so far (the trace's start to now)
    # live, where the node's GPU link is known (platform/ceiling.gpu_ceiling: the node's one GPU, or
    # the link every GPU shares): the most a pod's bytes can reach the GPU at, and what it is
    ceiling_gbps: float
    ceiling: str  # "the GPU's 63.02 GB/s PCIe Gen5 x16 link (0000:00:06.0)"


class IntervalPod(_IntervalPod, _IoSpan, _PodExtras):
    """One pod's share of an interval (the scale-out view; trace.model.interval.Intervals._pods)."""


class Interval(_Interval, total=False):
    """``--interval N`` (trace.model.interval): what the last N seconds' verdicts add up to."""

    waiting: Waiting  # live traces only (not --replay, not the last interval)
    pods: list[IntervalPod]  # live traces whose processes are in pods: per pod, most bytes first (at most 10)
