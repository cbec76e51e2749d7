"""``gdsdiag trace --interval N``: every N seconds, what the last N seconds' verdicts add up to, like
bcc's ``biolatency 1``: per route the I/O count, bytes, GB/s and latency percentiles, and the
busiest (process, file, route) rows. A verdict counts in the interval in which it is printed
(DRAM_BOUNCE verdicts, which wait for their CUDA copy, land in the interval they were decided in).
Its GB/s is over the interval, or over the span its I/Os took where that is longer (``io_span_s``):
verdicts held for their evidence and decided together (seconds of I/O in one interval, or in the
last, short one at the end) would otherwise show a rate the program never reached.
A --replay has no wall clock to follow: its intervals are cut by the verdicts' own timestamps.
Host I/O that the kernel counts instead of sending (processes without CUDA; docs/trace.md) comes in
as the growth of its counters since the last interval (``add_counted``): counts, bytes and GB/s, and
``counted_in_kernel`` on the HOST route; it has no per-I/O latencies, so it stays out of the
percentiles, as in the summary. A live interval also says what is still undecided at its end
(``waiting``: I/Os whose evidence may still come, such as reads a CUDA copy may yet take, which
become HOST only when their window ends), so a quiet HOST row is "not known yet", not "none"."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...schema import trace as schema

TOP = 10  # (process, file, route) rows per interval


class _Acc:
    __slots__ = ("count", "bytes", "lats", "first_ns", "last_ns")

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.lats: list[float] = []
        self.first_ns: int | None = None  # the earliest start of its I/Os (the probes' clock)
        self.last_ns: int | None = None  # the latest end

    def add(self, size: int, lat_ns: int | None, ts: int | None = None) -> None:
        self.count += 1
        self.bytes += max(size, 0)
        if lat_ns is not None:
            self.lats.append(lat_ns / 1000)
        if ts is not None:
            end = ts + (lat_ns or 0)
            if self.first_ns is None or ts < self.first_ns:
                self.first_ns = ts
            if self.last_ns is None or end > self.last_ns:
                self.last_ns = end

    def span_s(self, secs: float) -> float:
        """The seconds its bytes were moved in: the interval, or longer where verdicts held for their
        evidence came out together (a burst of 3 s of I/O decided in one 1 s interval). Bytes over
        this never exceed what the program did in the span its I/Os took."""
        if self.first_ns is None or self.last_ns is None:
            return secs
        return max(secs, (self.last_ns - self.first_ns) / 1e9)

    def out(self, secs: float) -> dict:
        from ...units import percentile

        lats = sorted(self.lats)
        span = self.span_s(secs)
        out = {
            "count": self.count,
            "bytes": self.bytes,
            "gbps": round(self.bytes / span / 1e9, 3) if span > 0 else None,
            "p50_us": percentile(lats, 50),
            "p99_us": percentile(lats, 99),
        }
        if span > secs:  # (decided late: the GB/s is over the span the I/Os took, said so)
            out["io_span_s"] = round(span, 3)
        return out


class Intervals:
    """Adds up verdicts; ``tick()`` returns an interval record when N seconds have passed."""

    # The node's ceiling beside each pod's GB/s (set_ceiling): the GPU's PCIe link, the most a pod's
    # bytes can reach the GPU at (platform/ceiling.gpu_ceiling, read from the node's own files, never
    # measured); None where it is not known (no GPU, GPUs on different links, a replay): GB/s alone
    _read_ceiling: Callable[[], tuple[float | None, str]] | None = None
    _ceiling: tuple[float | None, str] | None = None

    def set_ceiling(self, read: Callable[[], tuple[float | None, str]]) -> None:
        """READ gives the node's ceiling (GB/s or None, what it is): called once, at the first pod
        row, so a trace without pods never reads (or imports) it."""
        self._read_ceiling = read

    def _pod_ceiling(self) -> tuple[float | None, str]:
        if self._ceiling is None:
            self._ceiling = self._read_ceiling() if self._read_ceiling is not None else (None, "")
        return self._ceiling

    def __init__(self, every_s: float, clock=time.monotonic):
        if not every_s > 0:
            raise ValueError("interval must be > 0")
        self.every = every_s
        self.clock = clock
        self.t0 = self.start = None  # set by the first tick or verdict
        self._counters: dict[tuple, tuple[int, int]] = {}  # kernel counter -> (count, bytes) last seen
        self._reset()

    def _reset(self) -> None:
        self.routes: dict[str, _Acc] = {}
        self.rows: dict[tuple, _Acc] = {}
        self.counted_n = 0
        self._waiting: dict | None = None
        self._pod_of: dict | None = None
        self._cache: dict | None = None

    def set_pods(self, pod_of: dict) -> None:
        """Each process's pod (pid -> platform.containers.Identity, trace/pods.PodBook.of): the
        interval then says, per pod, its bytes, route mix and GB/s (the scale-out view)."""
        self._pod_of = pod_of

    def set_cache(self, per_pod: dict | None) -> None:
        """Each pod's page-cache hit share so far (pod uid -> cacheshare.CacheShare.of_pids): the
        interval's pod rows carry it (cumulative: a miss and the read it served may fall in two
        intervals, and a share over the pod's whole load is what a scale-out asks)."""
        self._cache = per_pod

    def set_waiting(self, rows: list[dict]) -> None:
        """What the classifier has not decided at the interval's end, per process ({pid, comm, ios,
        bytes}: result.waiting_rows)."""
        rows = sorted(rows, key=lambda r: (-r["bytes"], r["pid"]))
        self._waiting = {
            "ios": sum(r["ios"] for r in rows),
            "bytes": sum(r["bytes"] for r in rows),
            "by_process": rows[:TOP],
        }

    def due(self) -> bool:
        return self.start is not None and self.clock() - self.start >= self.every

    def add_counted(self, rows: list[dict]) -> None:
        """The kernel's host-I/O counters as they stand now (counted.CountedIo rows, cumulative):
        what they gained since the last call counts in this interval."""
        seen = self._counters
        for r in rows:
            key = (r["pid"], r["api"], r["path"], r["size_class"])
            n0, b0 = seen.get(key, (0, 0))
            dn, db = r["count"] - n0, r["bytes"] - b0
            seen[key] = (r["count"], r["bytes"])
            if dn <= 0:
                continue
            for acc in (
                self.routes.setdefault(r["route"], _Acc()),
                self.rows.setdefault((r["pid"], r["comm"], r["path"], r["route"]), _Acc()),
            ):
                acc.count += dn
                acc.bytes += max(db, 0)
            self.counted_n += dn

    def add(self, v: schema.IoLine) -> None:
        if self.start is None:
            self.t0 = self.start = self.clock()
        size, lat, ts = v["size"], v["latency_ns"], v.get("ts")
        acc = self.routes.get(v["route"])
        if acc is None:
            acc = self.routes[v["route"]] = _Acc()
        acc.add(size, lat, ts)
        key = (v["pid"], v["comm"], v["path"], v["route"])
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = _Acc()
        row.add(size, lat, ts)

    def _pods(self, secs: float) -> list[dict]:
        """Per pod, this interval's bytes, I/Os and route mix (bytes per route) and GB/s over the
        span its I/Os took (at least the interval), most bytes first, TOP of them."""
        pod_of = self._pod_of or {}
        accs: dict[str, tuple] = {}
        for (pid, _comm, _path, route), a in self.rows.items():
            i = pod_of.get(pid)
            if i is None or not i.pod_uid:
                continue
            got = accs.get(i.pod_uid)
            if got is None:
                got = accs[i.pod_uid] = (i, _Acc(), {})
            acc, routes = got[1], got[2]
            acc.count += a.count
            acc.bytes += a.bytes
            for ns in (a.first_ns, a.last_ns):
                if ns is not None:
                    acc.first_ns = ns if acc.first_ns is None else min(acc.first_ns, ns)
                    acc.last_ns = ns if acc.last_ns is None else max(acc.last_ns, ns)
            routes[route] = routes.get(route, 0) + a.bytes
        out = []
        for uid, (i, acc, routes) in accs.items():
            span = acc.span_s(secs)
            row = {
                "pod_uid": uid,
                "pod": i.pod,
                "namespace": i.namespace,
                "count": acc.count,
                "bytes": acc.bytes,
                "gbps": round(acc.bytes / span / 1e9, 3) if span > 0 else None,
                "routes": routes,
            }
            if self._cache is not None:
                row["page_cache"] = self._cache.get(uid)
            gbps, what = self._pod_ceiling()
            if gbps is not None:
                row["ceiling_gbps"] = gbps
                row["ceiling"] = what
            if span > secs:
                row["io_span_s"] = round(span, 3)
            out.append(row)
        return sorted(out, key=lambda r: (-r["bytes"], r["pod_uid"]))[:TOP]

    def tick(self, final: bool = False) -> dict | None:
        """The interval just ended (a schema.Interval dict), or None if it has not; final: the last,
        partial one (None when it saw nothing)."""
        now = self.clock()
        if self.start is None or self.t0 is None:
            self.t0 = self.start = now
            if not final:
                return None
        if not final and now - self.start < self.every:
            return None
        secs = now - self.start
        if final and not self.routes:
            return None
        waiting = self._waiting
        busiest = sorted(self.rows.items(), key=lambda kv: (-kv[1].bytes, -kv[1].count))[:TOP]
        routes = {r: a.out(secs) for r, a in sorted(self.routes.items())}
        if self.counted_n and "HOST" in routes:
            routes["HOST"]["counted_in_kernel"] = self.counted_n
        rec = {
            "type": "interval",
            "t_s": round(now - self.t0, 3),
            "interval_s": round(secs, 3),
            "routes": routes,
            "top": [
                {"pid": pid, "comm": comm, "path": path, "route": route, **a.out(secs)}
                for (pid, comm, path, route), a in busiest
            ],
            "rows_left_out": max(0, len(self.rows) - TOP),
        }
        if waiting is not None:
            rec["waiting"] = waiting
        if self._pod_of is not None:
            pods = self._pods(secs)
            if pods:
                rec["pods"] = pods
        self.start = now
        self._reset()
        return rec
