"""What the exporter publishes, as Prometheus metric families built from plain data.

Readers take a root (FsRoot) so the same code serves a live node and a test tree; the families are
rebuilt on every scrape from the latest data (nvidia-fs stats and the process scan are read at scrape
time; verdicts and trace counters come from the refresh loop). Every label set is bounded: GPUs and
nvidia-fs keys by the kernel file, rules by the policy, processes and trace 'comm' by MAX_COMMS.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..platform.containers import Identities, Identity
from ..platform.fsroot import FsRoot
from ..platform.nvfs_proc import parse_stats

if TYPE_CHECKING:
    from ..schema import trace as schema

MAX_COMMS = 16  # distinct process names kept as label values; the rest are "other"
MAX_PODS = 16  # (namespace, pod, container) label sets named at once (exporter --top-pods); the rest "other"
# The window the named sets are ranked over (bytes moved in it): a pod idle this long has none, and
# any pod loading now outgrows it, so a long-running exporter names the pods loading now.
POD_IDLE_S = 600.0
STATUSES = ("PASS", "WARN", "FAIL", "SKIP")


def nvfs_families(fs: FsRoot) -> list:
    """/proc/driver/nvidia-fs/stats (format: gds-nvidia-fs src/nvfs-stat.c) as metrics."""
    text = fs.read_text("/proc/driver/nvidia-fs/stats")
    up = GaugeMetricFamily("gdsdiag_nvfs_up", "1 if /proc/driver/nvidia-fs/stats was readable (nvidia-fs loaded).")
    up.add_metric([], 1 if text is not None else 0)
    out = [up]
    if text is None:
        return out
    s = parse_stats(text)
    info = GaugeMetricFamily(
        "gdsdiag_nvfs_info",
        "nvidia-fs versions (always 1).",
        labels=["driver_version", "gds_version", "stats_version", "io_stats"],
    )
    info.add_metric(
        [
            s.driver_version or "",
            s.gds_version or "",
            s.stats_version or "",
            "unknown" if s.io_stats is None else "enabled" if s.io_stats else "disabled",
        ],
        1,
    )
    out.append(info)
    if s.active_process is not None:
        g = GaugeMetricFamily("gdsdiag_nvfs_active_processes", "Processes with nvidia-fs state (Active Process).")
        g.add_metric([], s.active_process)
        out.append(g)
    if s.active_shadow_mib is not None:
        g = GaugeMetricFamily("gdsdiag_nvfs_active_shadow_buffer_bytes", "Active Shadow-Buffer (MiB × 2^20).")
        g.add_metric([], s.active_shadow_mib << 20)
        out.append(g)
    # Counter lines ("Reads : n=… ok=… err=…", "Ops : Read=… Write=…"): cumulative since module load,
    # except bandwidth/latency/active fields which are gauges in the kernel file.
    gauge_keys = {"Bandwidth(MiB/s)", "Avg-Latency(usec)", "active"}
    c = CounterMetricFamily(
        "gdsdiag_nvfs_events",
        "nvidia-fs cumulative counters (section and key as in the stats file).",
        labels=["section", "key"],
    )
    g = GaugeMetricFamily(
        "gdsdiag_nvfs_value",
        "nvidia-fs instantaneous values (bandwidth MiB/s, latency µs, active).",
        labels=["section", "key"],
    )
    for section, kv in sorted(s.counters.items()):
        for k, v in sorted(kv.items()):
            (g if k in gauge_keys else c).add_metric([section, k], v)
    out += [c, g]
    per_gpu = GaugeMetricFamily(
        "gdsdiag_nvfs_gpu",
        "nvidia-fs per-GPU values (Registered_MiB, Cache_MiB, max_pinned_MiB, "
        "cross_root_port(%) and, in newer drivers, per-GPU ops/bytes).",
        labels=["gpu", "uuid", "key"],
    )
    for gpu in s.gpus:
        for k, v in sorted(gpu.items()):
            if k not in ("bdf", "uuid"):
                per_gpu.add_metric([gpu["bdf"], gpu["uuid"], k], v)
    out.append(per_gpu)
    xr = GaugeMetricFamily(
        "gdsdiag_nvfs_cross_root_port_ratio",
        "Share of a GPU's nvidia-fs I/O that crossed a root port (0..1).",
        labels=["gpu"],
    )
    for gpu in s.gpus:
        if "cross_root_port(%)" in gpu:
            xr.add_metric([gpu["bdf"]], gpu["cross_root_port(%)"] / 100.0)
    out.append(xr)
    return out


# Bounds of the process scan of one scrape (issue 42: any local user can make many processes with
# huge /proc/PID/maps, and reading them whole, twice, took a scrape from 0.004 s to 7.8 s against
# Prometheus' 10 s timeout). A process's maps is looked at up to MAPS_BYTES (about 40,000
# mappings; a CUDA process has a few thousand), and the scan stops taking new processes after
# SCAN_SECONDS. What is left out is counted, and the scrape says it is partial.
MAPS_BYTES = 4 << 20
SCAN_SECONDS = 2.0


@dataclass
class ProcessScan:
    """The processes with libcufile mapped (pid -> comm), and how many were not looked at whole."""

    cufile: dict[int, str] = field(default_factory=dict)
    cut: int = 0  # maps longer than MAPS_BYTES, libcufile not in the part read
    not_reached: int = 0  # processes left when SCAN_SECONDS ran out

    @property
    def partial(self) -> bool:
        return bool(self.cut or self.not_reached)


def scan_processes(fs: FsRoot, seconds: float = SCAN_SECONDS, maps_bytes: int = MAPS_BYTES) -> ProcessScan:
    """Every /proc/PID/maps once, each read up to ``maps_bytes``, all within about ``seconds``."""
    scan = ProcessScan()
    pids = [p for p in fs.listdir("/proc") if p.isdigit()]
    deadline = time.monotonic() + seconds
    for i, pid in enumerate(pids):
        if time.monotonic() > deadline:
            scan.not_reached = len(pids) - i
            break
        maps = fs.read_bytes(f"/proc/{pid}/maps", limit=maps_bytes + 1)
        if not maps:
            continue  # gone, or not ours to read
        if b"libcufile" in maps:
            scan.cufile[int(pid)] = (fs.read_text(f"/proc/{pid}/comm") or "?").strip() or "?"
        elif len(maps) > maps_bytes:
            scan.cut += 1
    return scan


def cufile_processes(fs: FsRoot, scan: ProcessScan | None = None) -> Counter:
    """comm -> number of processes that have libcufile mapped (/proc/PID/maps). Their cuFile
    statistics live in each process; see docs/fleet.md for why they are not read from outside."""
    return Counter((scan or scan_processes(fs)).cufile.values())


def bound(counter: Counter, limit: int = MAX_COMMS) -> Counter:
    keep = {k for k, _ in counter.most_common(limit)}
    out: Counter = Counter()
    for k, v in counter.items():
        out[k if k in keep else "other"] += v
    return out


def stats_segments(fs: FsRoot) -> dict[int, int]:
    """pid -> bytes of the System V segment libcufile publishes its statistics in for gds_stats -p PID.
    Seen on the GPU machine (libcufile 1.15.1.6, compat mode, stats level 3): key == the process id,
    31888 bytes, created at cuFileDriverOpen (tests/fixtures/gpu-machine/sysvipc-shm-during-validate.txt)."""
    text = fs.read_text("/proc/sysvipc/shm") or ""
    out: dict[int, int] = {}
    lines = text.splitlines()
    if not lines:
        return out
    head = lines[0].split()
    for line in lines[1:]:
        row = dict(zip(head, line.split()))
        try:
            key, cpid, size = int(row["key"]), int(row["cpid"]), int(row["size"])
        except (KeyError, ValueError):
            continue
        if key == cpid and key > 0:
            out[cpid] = size
    return out


def process_families(fs: FsRoot) -> list:
    scan = scan_processes(fs)
    g = GaugeMetricFamily(
        "gdsdiag_cufile_processes",
        "Processes with libcufile loaded, by process name (top 16, rest 'other').",
        labels=["comm"],
    )
    for comm, v in sorted(bound(cufile_processes(fs, scan)).items()):
        g.add_metric([comm], v)
    seg: Counter[str] = Counter(scan.cufile[pid] for pid in stats_segments(fs) if pid in scan.cufile)
    p = GaugeMetricFamily(
        "gdsdiag_cufile_stats_published",
        "Processes whose libcufile publishes statistics in a System V "
        "segment keyed by their pid (what gds_stats -p reads; counters not decoded, see docs/fleet.md).",
        labels=["comm"],
    )
    for comm, v in sorted(bound(seg).items()):
        p.add_metric([comm], v)
    part = GaugeMetricFamily(
        "gdsdiag_cufile_processes_partial",
        "1 if this scrape's process scan left processes out (maps over 4 MiB, or the 2 s scan budget "
        "spent): the two families above are then a lower bound.",
    )
    part.add_metric([], 1 if scan.partial else 0)
    left = GaugeMetricFamily(
        "gdsdiag_cufile_processes_unscanned",
        "Processes this scrape did not look at whole, by why (maps_cut, budget).",
        labels=["why"],
    )
    left.add_metric(["maps_cut"], scan.cut)
    left.add_metric(["budget"], scan.not_reached)
    return [g, p, part, left]


NO_POD = ("", "", "")  # a process outside any pod: empty labels (Prometheus: the label is absent)
OTHER_POD = ("other", "other", "other")
TRACE_LABELS = ["route", "comm", "op", "namespace", "pod", "container"]
# The ranking of label sets (docs/fleet.md, "bounded by bytes"): bytes moved in the last RANK_WINDOW_S,
# in RANK_BUCKET_S buckets; the named are re-ranked at most every RERANK_S; a set outside takes a
# named one's place only once it has moved OUTGROW times its bytes in the window (two pods loading
# side by side at the same pace must not trade places on every scrape: each trade ends a series).
RANK_WINDOW_S = POD_IDLE_S
RANK_BUCKET_S = 60.0
RERANK_S = 10.0
OUTGROW = 2.0
MAX_RANKED = 65_536  # label sets ranked at once (more: the newest count under 'other' unranked)
MAX_PARKED = 16_384  # displaced sets whose counters are kept for their return (oldest dropped past it)
CACHE_KEY = ("page_cache",)  # (a parked set's page-cache counters: read, filled bytes)
POD_LABELS = ["namespace", "pod", "container"]


class _Recent:
    """A label set's bytes in the last RANK_WINDOW_S: per RANK_BUCKET_S bucket."""

    __slots__ = ("buckets", "last")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.last = 0.0  # when it last had I/O

    def add(self, now: float, nbytes: int) -> None:
        b = int(now // RANK_BUCKET_S)
        self.buckets[b] = self.buckets.get(b, 0) + nbytes
        self.last = now
        if len(self.buckets) > RANK_WINDOW_S / RANK_BUCKET_S + 1:
            self.total(now)  # (drops the old buckets)

    def total(self, now: float) -> int:
        first = int((now - RANK_WINDOW_S) // RANK_BUCKET_S) + 1
        for b in [b for b in self.buckets if b < first]:
            del self.buckets[b]
        return sum(self.buckets.values())


class TraceCounters:
    """Route counters fed by gdsdiag trace verdicts: (route, comm, op, namespace, pod, container) →
    I/Os and bytes. The first MAX_COMMS process names keep their label, later ones count under
    'other'. A process's pod is read from the node (platform/containers.py, through IDS) the first
    time one of its I/Os comes in each trace window.

    At most POD_LIMIT (namespace, pod, container) label sets are named at once: the top ones by bytes
    moved in the last RANK_WINDOW_S; the rest count under 'other'. A new set takes a free place at
    once; one outside takes a named one's place (at a re-rank, every RERANK_S) once it has moved
    OUTGROW times the bytes of the least busy named set in the window (an idle one: any bytes).
    Counters never go down: the displaced set's series leave the output (Prometheus marks them
    stale) with their values kept, its later bytes count under 'other' from then on, and if it is
    named again its series go on from the kept values. A set taking a place starts from its kept
    values or from nothing: bytes already counted under 'other' stay there (moving them would count
    them twice in rate() over 'other' and the set). docs/fleet.md says this rule."""

    def __init__(
        self,
        limit: int = MAX_COMMS,
        ids: Identities | None = None,
        pod_limit: int = MAX_PODS,
        clock=time.monotonic,
    ):
        self.lock = threading.Lock()
        self.ios: Counter = Counter()
        self.bytes: Counter = Counter()
        self.comms: set[str] = set()
        self.limit = limit
        self.ids = ids
        self.identities = ids  # (run_live reads each traced process's pod with it: trace/live.py)
        self.pod_limit = pod_limit
        self.clock = clock
        self.pods: set[tuple[str, str, str]] = set()  # the named label sets
        self.recent: dict[tuple[str, str, str], _Recent] = {}  # every ranked set's bytes in the window
        # displaced sets -> their counters' values ({key: (ios, bytes)}), oldest first
        self.parked: dict[tuple[str, str, str], dict[tuple, tuple[int, int]]] = {}
        # named set -> [bytes its reads returned through the page cache, bytes the kernel added to it]
        self.cache: dict[tuple[str, str, str], list[int]] = {}
        self._ranked_at = float("-inf")
        self._labels: dict[int, tuple[str, str, str]] = {}  # pid -> its label set, this window
        self._known: dict[int, Identity] = {}  # the trace's own reads (trace/pods.PodBook.of)

    def use_identities(self, known: dict[int, Identity]) -> None:
        """The trace window's identities, read while its processes lived (run_live hands them over):
        a verdict held for evidence, or a kernel counter read at the window's end, comes after its
        process may have gone."""
        with self.lock:
            self._known = known

    def new_window(self) -> None:
        """A new trace window: pids are read again (a pid may have been reused by another pod's process)."""
        with self.lock:
            self._labels.clear()

    def __call__(self, v: schema.IoLine) -> None:
        self._add(v["route"], v["comm"], v["op"], 1, max(v["size"], 0), v["pid"])

    def add_counted(self, row: dict) -> None:
        """A counter of host I/O the kernel kept (gdsdiag/trace/model/counted.py): many I/Os at once."""
        self._add(row["route"], row["comm"], row["op"], row["count"], row["bytes"], row.get("pid"))

    def add_page_cache(self, pid: int, read: int, filled: int | None) -> None:
        """A window's page-cache reads and fills of process PID (trace/model/cacheshare.py), under its
        pod's label set (not ranked by: its bytes are in the route counters). A process outside
        any pod, or fills that could not be read, add nothing."""
        with self.lock:
            pod = self._pod_of(pid)
            if pod == NO_POD or filled is None:
                return
            got = self.cache.setdefault(self._named(pod, 0, self.clock()), [0, 0])
            got[0] += read
            got[1] += filled

    def _pod_of(self, pid: int | None) -> tuple[str, str, str]:
        if self.ids is None or pid is None:
            return NO_POD
        got = self._labels.get(pid)
        if got is None:
            i = self._known.get(pid)
            got = pod_labels(i if i is not None else self.ids.read(pid))
            if len(self._labels) < 65_536:
                self._labels[pid] = got
        return got

    def _named(self, pod: tuple[str, str, str], nbytes: int, now: float) -> tuple[str, str, str]:
        """POD's label values for bytes it moves now: itself while named (or given a free place),
        else OTHER_POD. Counts NBYTES to its rank."""
        if pod == NO_POD:
            return pod
        r = self.recent.get(pod)
        if r is None and len(self.recent) < MAX_RANKED:
            r = self.recent[pod] = _Recent()
        if r is not None:
            r.add(now, nbytes)
        if pod in self.pods:
            return pod
        if len(self.pods) < self.pod_limit:
            self._name(pod)
            return pod
        if now - self._ranked_at >= RERANK_S:
            self._rerank(now)
            if pod in self.pods:
                return pod
        return OTHER_POD

    def _name(self, pod: tuple[str, str, str]) -> None:
        self.pods.add(pod)
        for k, (n, b) in self.parked.pop(pod, {}).items():  # (its series go on from where they ended)
            if k == CACHE_KEY:
                self.cache[pod] = [n, b]
            else:
                self.ios[k], self.bytes[k] = n, b

    def _park(self, pod: tuple[str, str, str]) -> None:
        self.pods.discard(pod)
        keys = [k for k in self.ios if k[3:] == pod]
        self.parked[pod] = {k: (self.ios.pop(k), self.bytes.pop(k)) for k in keys}
        if pod in self.cache:
            read, filled = self.cache.pop(pod)
            self.parked[pod][CACHE_KEY] = (read, filled)
        while len(self.parked) > MAX_PARKED:
            del self.parked[next(iter(self.parked))]

    def _rerank(self, now: float) -> None:
        """Let the busiest sets outside take the places of the named ones they outgrew (OUTGROW)."""
        self._ranked_at = now
        for pod in [p for p, r in self.recent.items() if p not in self.pods and now - r.last > RANK_WINDOW_S]:
            del self.recent[pod]  # (no bytes in the window: nothing to rank it by)
        outside = sorted(
            ((r.total(now), p) for p, r in self.recent.items() if p not in self.pods), key=lambda x: (-x[0], x[1])
        )
        named = sorted((self.recent[p].total(now) if p in self.recent else 0, p) for p in self.pods)
        for (b, pod), (low, weakest) in zip(outside, named):
            if b <= 0 or b <= OUTGROW * low:
                break
            self._park(weakest)
            self._name(pod)

    def rerank(self) -> None:
        """A re-rank now if one is due (every scrape: a set that outgrew a named one, while no new
        I/O of it came, still gets its place)."""
        with self.lock:
            now = self.clock()
            if now - self._ranked_at >= RERANK_S:
                self._rerank(now)

    def _add(self, route, comm, op, n: int, nbytes: int, pid: int | None = None) -> None:
        with self.lock:
            comm = comm if comm in self.comms or len(self.comms) < self.limit else "other"
            self.comms.add(comm) if comm != "other" else None
            key = (route, comm, op, *self._named(self._pod_of(pid), nbytes, self.clock()))
            self.ios[key] += n
            self.bytes[key] += nbytes

    def families(self) -> list:
        self.rerank()
        ios = CounterMetricFamily(
            "gdsdiag_trace_ios",
            "I/Os seen by gdsdiag trace, by route, process name, op and Kubernetes namespace, pod and container "
            "('' outside a pod; the top pods by bytes in the last 10 min named, the rest 'other').",
            labels=TRACE_LABELS,
        )
        by = CounterMetricFamily(
            "gdsdiag_trace_bytes",
            "Bytes of the I/Os seen by gdsdiag trace (labels as gdsdiag_trace_ios).",
            labels=TRACE_LABELS,
        )
        read = CounterMetricFamily(
            "gdsdiag_trace_page_cache_read_bytes",
            "Bytes the traced reads of data files returned through the page cache (not O_DIRECT, cuFile or mmap), "
            "per Kubernetes pod (labels bounded as gdsdiag_trace_ios).",
            labels=POD_LABELS,
        )
        filled = CounterMetricFamily(
            "gdsdiag_trace_page_cache_filled_bytes",
            "Bytes the kernel added to the page cache inside those reads (their misses, readahead included): "
            "1 - filled/read is the pod's page-cache hit share.",
            labels=POD_LABELS,
        )
        with self.lock:
            for k in sorted(self.ios):
                ios.add_metric(list(k), self.ios[k])
                by.add_metric(list(k), self.bytes[k])
            for pod in sorted(self.cache):
                read.add_metric(list(pod), self.cache[pod][0])
                filled.add_metric(list(pod), self.cache[pod][1])
        return [ios, by, read, filled]


def pod_labels(i: Identity) -> tuple[str, str, str]:
    """(namespace, pod, container) label values of a process's identity: the pod's name, or its UID
    where no log directory names it ('unknown' namespace); the container's name, or its ID's first
    12 digits. A process outside any pod (a host process, or a container no pod holds): ''."""
    if not i.pod_uid:
        return NO_POD
    return (
        i.namespace or "unknown",
        i.pod or i.pod_uid,
        i.container or (i.container_id[:12] if i.container_id else "unknown"),
    )


def verdict_families(report, when: float | None, errors: int, last_error: str | None) -> list:
    """The last validate report (static rules, which run gdsdiag check underneath)."""
    out = []
    ts = GaugeMetricFamily("gdsdiag_verdicts_timestamp_seconds", "When the verdicts were last refreshed (0: not yet).")
    ts.add_metric([], when or 0)
    err = CounterMetricFamily(
        "gdsdiag_verdicts_refresh_errors", "Refreshes that failed (the last error is in the log)."
    )
    err.add_metric([], errors)
    out += [ts, err]
    if report is None:
        return out
    rp = GaugeMetricFamily(
        "gdsdiag_rule_pass",
        "1 if the rule passed, 0 if it failed or warned (skipped rules are absent).",
        labels=["rule"],
    )
    rs = GaugeMetricFamily(
        "gdsdiag_rule_status", "One series per rule and verdict; 1 marks the rule's verdict.", labels=["rule", "status"]
    )
    for r in report.results:
        if r.status.value != "SKIP":
            rp.add_metric([r.rule], 1 if r.status.value == "PASS" else 0)
        for st in STATUSES:
            rs.add_metric([r.rule, st], 1 if r.status.value == st else 0)
    ex = GaugeMetricFamily("gdsdiag_validate_exit_code", "Exit code of the last refresh: 0 pass, 1 warn, 2 fail.")
    ex.add_metric([], report.exit_code)
    return out + [rp, rs, ex]


class Collector:
    """The prometheus_client collector: everything is read or copied at scrape time."""

    def __init__(self, fs: FsRoot, state):
        self.fs, self.state = fs, state

    def collect(self):
        yield from nvfs_families(self.fs)
        yield from process_families(self.fs)
        st = self.state
        yield from verdict_families(st.report, st.when, st.errors, st.last_error)
        if st.trace is not None:
            yield from st.trace.families()
