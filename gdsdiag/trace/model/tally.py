"""The trace summary's route table, kept as the verdicts go by instead of from a list of them.

A trace (and a replay near its 2,000,000-event limit) used to keep every verdict line (~0.8 KB with
its evidence) only to summarise them at the end: 1.7 GiB of a 2.3 GiB replay. Per route the
summary needs the count, the bytes, the subtypes and the latencies for the percentiles and the
histogram: the latencies are kept as 8-byte doubles, everything else as running totals."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import TYPE_CHECKING

from ...routes import Route

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ...schema import trace as schema


# the summary's order of routes: P2P DMA first, then the fallbacks, then what is not on the GPU path
ROUTES = (
    Route.NVFS,
    Route.P2PDMA,
    Route.RDMA,
    Route.PEER_GPU,
    Route.COMPAT,
    Route.DRAM_BOUNCE,
    Route.HOST,
    Route.UNKNOWN,
)


# What a trace counted but could not classify, per process: {pid: [events, I/Os (reads and writes),
# their bytes, reads, read bytes]}. Three places fill it, each for what it alone sees: ring records a
# stop drops undecoded (bpf.tally_records), decoded events past the stop's deadline (live), I/Os held
# for evidence the stop cut short (Classifier.flush). result.result_of names the columns (schema.LostRow).
Unclassified = dict[int, list[int]]


def count_unclassified(
    into: Unclassified, pid: int, events: int = 1, ios: int = 0, nbytes: int = 0, read: bool = False
) -> None:
    """Add EVENTS to PID's row of INTO (see Unclassified), IOS of them reads or writes (all reads
    if READ) that moved NBYTES."""
    _add(into, pid, (events, ios, nbytes, ios if read else 0, nbytes if read else 0))


def merge_unclassified(into: Unclassified, other: Unclassified) -> None:
    """Add every row of OTHER to INTO's."""
    for pid, row in other.items():
        _add(into, pid, row)


def _add(into: Unclassified, pid: int, row) -> None:
    mine = into.get(pid)
    if mine is None:
        mine = into[pid] = [0, 0, 0, 0, 0]
    for i, n in enumerate(row):
        mine[i] += n


def log2_hist(ascending_us: Sequence[float]) -> list[tuple[int, int, int]]:
    """(low, high, count) buckets of powers of two in µs, like bcc's biolatency, of an ascending
    sequence (the summary sorts its latencies for the percentiles anyway): each bucket's edge found
    by bisection, not each value's bucket by a log2 (a 200k-verdict trace's summary spent 70 ms on
    that, a third of a µs a verdict)."""
    n = len(ascending_us)
    if n == 0:
        return []
    rows = []
    below = bisect_left(ascending_us, 1)  # bucket 0: under 1 µs
    rows.append((0, 0, below))
    b = 1
    while below < n and b <= 1024:  # bucket b: [2^(b-1), 2^b) µs (past 2^1024: only inf, not a latency)
        upto = bisect_left(ascending_us, 1 << b, below)
        rows.append((1 << (b - 1), (1 << b) - 1, upto - below))
        below, b = upto, b + 1
    return rows


class _Route:
    __slots__ = ("count", "bytes", "subtypes", "lat_us")

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.subtypes: set[str] = set()
        self.lat_us = array("d")


class RouteTally:
    """Counts, bytes, subtypes and latencies per route of the verdicts added so far."""

    def __init__(self) -> None:
        self._routes: dict[str, _Route] = {}
        self.ios = 0  # verdicts added
        # (pid, route) -> [I/Os, bytes]: what each process moved on each route, for the per-pod rows
        # (trace/pods.py; a file read by a dozen pods is a dozen pods' bytes, not its first reader's)
        self.by_pid: dict[tuple[int, str], list[int]] = {}

    def add(self, v: schema.IoLine) -> None:
        self.add_all((v,))

    def add_all(self, vs: Sequence[schema.IoLine]) -> None:
        """Each of VS (the live loop hands out a poll's verdicts together; add() one alone)."""
        routes, by_pid = self._routes, self.by_pid
        self.ios += len(vs)
        last_pid = last_route = p = None  # (a poll's verdicts come in runs of one process and route)
        for v in vs:
            r = routes.get(v["route"])
            if r is None:
                r = routes[v["route"]] = _Route()
            r.count += 1
            size = v["size"]
            if size > 0:
                r.bytes += size
            pid, route = v.get("pid"), v["route"]  # (a verdict made by hand may name no process)
            if pid != last_pid or route != last_route or p is None:
                last_pid, last_route = pid, route
                p = by_pid.get((pid, route))
                if p is None:
                    p = by_pid[pid, route] = [0, 0]
            p[0] += 1
            if size > 0:
                p[1] += size
            if v["subtype"]:
                r.subtypes.add(v["subtype"])
            lat = v["latency_ns"]
            if lat is not None:
                r.lat_us.append(lat / 1000)

    def summary(self) -> dict:
        """{route: {count, bytes, subtypes, p50_us, p99_us, hist_us}} in the route vocabulary's order."""
        from ...units import percentile

        out = {}
        for name in ROUTES:
            r = self._routes.get(name)
            if r is None:
                continue
            lats = sorted(r.lat_us)
            out[name] = {
                "count": r.count,
                "bytes": r.bytes,
                "subtypes": sorted(r.subtypes),
                "p50_us": percentile(lats, 50),
                "p99_us": percentile(lats, 99),
                "hist_us": log2_hist(lats),
            }
        return out


def summarize(verdicts: Iterable[schema.IoLine]) -> dict:
    """The summary's route table of a list of verdicts (what RouteTally keeps as they go by)."""
    t = RouteTally()
    for v in verdicts:
        t.add(v)
    return t.summary()
