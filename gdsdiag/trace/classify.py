"""The per-I/O route classifier: a pure function of the event stream (live or replayed).

For every cuFile I/O (cuFileRead/Write, the async and batch forms) it collects the evidence that
fired for that I/O — on the calling thread or on libcufile's worker threads, matched by process,
time window, direction and file offset — and decides the route:

  P2P        nvidia-fs (USDT cufio_gds_*, NVFS read/write ioctls, nvidia-fs kernel returns),
             pci-p2pdma (P2PDMA mapping returns) or rdma (cufio_rdma_*)
  PEER_GPU   dynamic routing through a GPU nearer the storage (cufio-dr probes)
  COMPAT     libcufile's POSIX path: USDT cufio_px_* and/or pread/pwrite on the file
  DRAM_BOUNCE host staging outside cuFile: the application's own pread/pwrite into host memory
             (with a CUDA copy seen next to it when libcuda could be probed)
  UNKNOWN    nothing conclusive fired

Argument meanings used (worked out on the GPU machine, captures in ../shared/research/captures/
and tests/fixtures/trace/): USDT cufio_core:cufio_px_read/write (6 args): arg1 = 0, arg2 = file
offset, arg3 = size, arg4 = GPU buffer offset, arg5 = bytes done, arg6 = 0; it fires on the thread
that issued the pread64/pwrite64, after the syscall returns. Requests >= 8 MiB are split into 8 MiB
chunks on worker threads: chunks are folded back into their API call by offset range.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from .events import NVFS_IOCTLS, Event

P2P, PEER_GPU, COMPAT, DRAM_BOUNCE, UNKNOWN = "P2P", "PEER_GPU", "COMPAT", "DRAM_BOUNCE", "UNKNOWN"
ROUTES = (P2P, PEER_GPU, COMPAT, DRAM_BOUNCE, UNKNOWN)

READ_SYS = {"pread64", "preadv", "preadv2"}
WRITE_SYS = {"pwrite64", "pwritev", "pwritev2"}
HOLD_NS = 100_000_000          # wait this long (event time) before calling an unmatched syscall app I/O
FINALIZE_NS = 50_000_000       # evidence from other CPUs can arrive after the API exit
ASYNC_TIMEOUT_NS = 5_000_000_000
SKIP_PREFIXES = ("/proc/", "/sys/", "/dev/", "/run/", "pipe:", "socket:", "anon_inode:")
# the dynamic loader and interpreters read ELF headers and sources with pread: not data I/O
SKIP_SUFFIX_RE = __import__("re").compile(r"(\.so(\.\d+)*|\.py|\.pyc)$")
MIN_APP_IO = 4096


@dataclass
class IoVerdict:
    ts: int
    pid: int
    tid: int
    comm: str
    api: str                 # cuFileRead … or the syscall name for application I/O
    op: str                  # read | write
    path: str | None
    offset: int
    size: int
    ret: int | None
    latency_ns: int | None
    route: str
    subtype: str | None
    confidence: str          # high | medium | low
    evidence: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class _Pending:
    pid: int
    tid: int
    comm: str
    api: str
    op: str
    handle: int
    offset: int
    size: int
    t_start: int
    t_end: int | None = None
    ret: int | None = None
    evidence: dict = field(default_factory=dict)       # evidence label -> count
    bytes_seen: int = 0
    last_ts: int = 0
    kinds: set = field(default_factory=set)
    is_async: bool = False
    path: str | None = None            # resolved when the call starts (the handle may be gone later)

    def add(self, label: str, kind: str, ts: int, nbytes: int = 0) -> None:
        self.evidence[label] = self.evidence.get(label, 0) + 1
        self.kinds.add(kind)
        self.bytes_seen += nbytes
        self.last_ts = max(self.last_ts, ts)

    def covers(self, off: int) -> bool:
        return self.offset <= off < self.offset + max(self.size, 1)


def _op_of(name: str) -> str | None:
    n = name.lower()
    if "read" in n:
        return "read"
    if "write" in n:
        return "write"
    return None


class Classifier:
    """Feed events in (roughly) time order with ``feed``; collect ``IoVerdict``s from ``drain`` and at
    the end from ``flush``. Keeps per-process state only for I/O still open."""

    def __init__(self, path_filter: str | None = None):
        self.path_filter = path_filter.rstrip("/") + "/" if path_filter else None
        self.handles: dict[tuple[int, int], tuple[int, str | None]] = {}   # (pid, handle) -> (fd, path)
        self.fds: dict[tuple[int, int], str] = {}                           # (pid, fd) -> path, from openat
        self.pending: list[_Pending] = []
        self.held: deque = deque()                 # unmatched syscalls waiting for HOLD_NS (time order)
        self.memcpy: dict[int, deque] = {}         # pid -> recent cuMemcpy events
        self.api_stack: dict[tuple[int, int], list[_Pending]] = {}
        self.out: list[IoVerdict] = []
        self.now = 0
        self.notes: list[str] = []
        self.counts = {"events": 0, "api_calls": 0, "unmatched_exits": 0}

    # -- input ---------------------------------------------------------------------------------
    def feed(self, e: Event) -> None:
        self.counts["events"] += 1
        self.now = max(self.now, e.ts)
        k = e.kind
        if k == "open":
            if e.path and e.args:
                self.fds[(e.pid, e.args[0])] = e.path
            return
        if k == "sys_exit" and e.path is None and e.args:
            e.path = self.fds.get((e.pid, e.args[0]))
        if k == "handle" and e.name == "cuFileHandleRegister" and e.path is None and len(e.args) > 1:
            e.path = self.fds.get((e.pid, e.args[1]))
        if k == "handle":
            self._on_handle(e)
        elif k == "api_enter":
            self._on_api_enter(e)
        elif k == "api_exit":
            self._on_api_exit(e)
        elif k == "batch_req":
            self._on_batch_req(e)
        elif k in ("usdt", "sys_exit", "kprobe"):
            self._on_evidence(e)
        if self.counts["events"] % 512 == 0:
            self._advance()

    def advance(self) -> None:
        """Finalise what is old enough; the live loop calls it after each batch of events."""
        self._advance()

    def _on_handle(self, e: Event) -> None:
        if e.name == "cuFileHandleRegister" and len(e.args) >= 3 and e.args[2] == 0:
            self.handles[(e.pid, e.args[0])] = (e.args[1], e.path)
        elif e.name == "cuFileHandleDeregister":
            self.handles.pop((e.pid, e.args[0]), None)

    def _on_api_enter(self, e: Event) -> None:
        if e.name == "cuMemcpy":
            self.memcpy.setdefault(e.pid, deque(maxlen=4096)).append(e)
            return
        if e.name not in ("cuFileRead", "cuFileWrite", "cuFileReadAsync", "cuFileWriteAsync"):
            self.api_stack.setdefault((e.pid, e.tid), []).append(
                _Pending(e.pid, e.tid, e.comm, e.name, "", 0, 0, 0, e.ts))
            return
        self.counts["api_calls"] += 1
        a = e.args + [0] * 6
        p = _Pending(e.pid, e.tid, e.comm, e.name, _op_of(e.name), a[0], a[3], a[2], e.ts,
                     is_async=e.name.endswith("Async"), path=self.handles.get((e.pid, a[0]), (None, None))[1])
        self.pending.append(p)
        self.api_stack.setdefault((e.pid, e.tid), []).append(p)

    def _on_api_exit(self, e: Event) -> None:
        stack = self.api_stack.get((e.pid, e.tid))
        if not stack:
            self.counts["unmatched_exits"] += 1
            return
        p = stack.pop()
        if p.api in ("cuFileRead", "cuFileWrite"):
            ret = e.args[0] if e.args else None
            if ret is not None and ret >= 1 << 63:
                ret -= 1 << 64
            p.ret, p.t_end = ret, e.ts
        elif p.is_async:
            p.ret = e.args[0] if e.args else None       # the enqueue status; I/O follows on the stream

    def _on_batch_req(self, e: Event) -> None:
        a = e.args + [0] * 7
        self.counts["api_calls"] += 1
        self.pending.append(_Pending(e.pid, e.tid, e.comm, "cuFileBatchIO", _op_of(e.name), a[0], a[3], a[2], e.ts,
                                     is_async=True, path=self.handles.get((e.pid, a[0]), (None, None))[1]))

    def _candidates(self, e: Event, op: str | None, off: int | None) -> list[_Pending]:
        slack = 2_000_000
        out = []
        for p in self.pending:
            if p.pid != e.pid:
                continue
            if e.ts < p.t_start - slack:
                continue
            if p.t_end is not None and e.ts > p.t_end + slack:
                continue
            if op is not None and p.op and p.op != op:
                continue
            if off is not None and not p.covers(off):
                continue
            out.append(p)
        # prefer the same thread, then the latest started
        out.sort(key=lambda p: (p.tid != e.tid, -p.t_start))
        return out

    def _on_evidence(self, e: Event) -> None:
        name = e.name
        a = e.args
        if e.kind == "usdt":
            short = name.split(":", 1)[-1]
            if short.startswith(("cufio_px_", "cufio_gds_", "cufio_rdma_")) and "retry" not in short:
                op = _op_of(short)
                off = a[1] if short.startswith("cufio_px_") and len(a) > 1 else None
                nbytes = a[2] if short.startswith("cufio_px_") and len(a) > 2 else 0
                kind = "px" if "_px_" in short else "gds" if "_gds_" in short else "rdma"
                cands = self._candidates(e, op, off)
                if cands:
                    cands[0].add(f"usdt {name}", kind, e.ts, nbytes)
                return
            kind = "dr" if name.startswith("cufio-dr") else "bb" if "-bb" in short else "p2pdma" if name.startswith("cuf-p2p") \
                else "retry" if "retry" in short else "other"
            for p in self._candidates(e, None, None)[:1]:
                p.add(f"usdt {name}", kind, e.ts)
            return
        if e.kind == "kprobe":
            ret = a[0] if a else 0
            kind = {"nvfs_get_dma": "nvfs_k" if ret == 0 else "",
                    "nvfs_blk_rq_map_sg": "nvfs_k" if ret > 0 else "cpu_k",
                    "nvfs_dma_map_sg_attrs": "nvfs_k" if ret > 0 else "cpu_k",
                    "nvfs_blk_rq_dma_map_iter_start": "nvfs_k" if ret == 1 else "cpu_k",
                    "pci_p2pdma_map_segment": "p2pdma" if ret in (3, 4) else ""}.get(name, "")
            if kind:
                for p in self._candidates(e, None, None)[:1]:
                    p.add(f"kprobe {name}={ret}", kind, e.ts)
            return
        # syscalls
        if name == "ioctl":
            cmd = a[4] if len(a) > 4 else 0
            label = NVFS_IOCTLS.get(cmd, hex(cmd))
            op = "read" if label == "NVFS_IOCTL_READ" else "write" if label == "NVFS_IOCTL_WRITE" else None
            if op:
                for p in self._candidates(e, op, None)[:1]:
                    p.add(f"ioctl {label}", "nvfs_ioctl", e.ts)
            return
        if name in READ_SYS or name in WRITE_SYS:
            if not self._match_syscall(e):
                self.held.append(e)
            return
        if name in ("io_submit", "io_uring_enter"):
            # one submission carries many requests (libcufile's compat batch path uses io_submit)
            for p in self._candidates(e, None, None):
                if p.api == "cuFileBatchIO" or p.is_async:
                    p.add(f"{name}", "aio", e.ts)

    def _match_syscall(self, e: Event) -> bool:
        a = e.args + [0] * 7
        op = "read" if e.name in READ_SYS else "write"
        pos = a[3]
        cands = self._candidates(e, op, pos)
        if not cands:
            return False
        cands[0].add(f"{e.name} fd {a[0]}", "posix", e.ts, 0)
        return True

    # -- finalisation ----------------------------------------------------------------------------
    def _advance(self) -> None:
        now = self.now
        keep = []
        for p in self.pending:
            done = False
            if p.is_async:
                done = (p.bytes_seen >= p.size > 0) or now > p.t_start + ASYNC_TIMEOUT_NS
                if done and p.t_end is None:
                    p.t_end = p.last_ts or now
            elif p.t_end is not None and now > p.t_end + FINALIZE_NS:
                done = True
            if done:
                self.out.append(self._verdict(p))
            else:
                keep.append(p)
        self.pending = keep
        while self.held and self.held[0].ts + HOLD_NS < now:
            e = self.held.popleft()
            if not self._match_syscall(e):
                v = self._app_verdict(e)
                if v is not None:
                    self.out.append(v)

    def flush(self) -> None:
        for p in self.pending:
            if p.t_end is None:
                p.t_end = p.last_ts or p.t_start
            self.out.append(self._verdict(p))
        self.pending = []
        for e in self.held:
            if not self._match_syscall(e):
                v = self._app_verdict(e)
                if v is not None:
                    self.out.append(v)
        self.held = deque()
        self.out.sort(key=lambda v: v.ts)

    def drain(self) -> list[IoVerdict]:
        out, self.out = self.out, []
        return out

    def _path_ok(self, path: str | None) -> bool:
        if self.path_filter is None:
            return True
        return bool(path) and (path.rstrip("/") + "/").startswith(self.path_filter)

    def _verdict(self, p: _Pending) -> IoVerdict:
        path = p.path or self.handles.get((p.pid, p.handle), (None, None))[1]
        ev = [f"{k}" + (f" ×{n}" if n > 1 else "") for k, n in p.evidence.items()]
        kinds = p.kinds
        sub = None
        if "gds" in kinds or "nvfs_k" in kinds:
            route, sub, conf = P2P, "nvidia-fs", "high"
        elif "nvfs_ioctl" in kinds:
            route, sub, conf = P2P, "nvidia-fs", "medium"
        elif "p2pdma" in kinds:
            route, sub, conf = P2P, "pci-p2pdma", "high"
        elif "rdma" in kinds:
            route, sub, conf = P2P, "rdma", "high"
        elif "dr" in kinds:
            route, sub, conf = PEER_GPU, "dynamic-routing", "medium"
        elif "px" in kinds or "posix" in kinds or "aio" in kinds:
            route = COMPAT
            conf = "high" if ("px" in kinds and "posix" in kinds) else "medium"
            if "bb" in kinds:
                ev.append("through libcufile's bounce buffers")
        elif "bb" in kinds:
            route, conf = UNKNOWN, "low"
            ev.append("bounce-buffer probes only")
        else:
            route, conf = UNKNOWN, "low"
            ev.append("no route evidence fired inside this call")
        if "cpu_k" in kinds and route == P2P:
            ev.append("some requests mapped CPU pages")
        lat = (p.t_end - p.t_start) if p.t_end is not None else None
        size = p.size
        return IoVerdict(p.t_start, p.pid, p.tid, p.comm, p.api, p.op, path, p.offset, size, p.ret, lat, route, sub, conf, ev)

    def _app_verdict(self, e: Event) -> IoVerdict | None:
        path = e.path
        if path is None or path.startswith(SKIP_PREFIXES) or SKIP_SUFFIX_RE.search(path) or not self._path_ok(path):
            return None
        a = e.args + [0] * 7
        if 0 <= a[5] < MIN_APP_IO:        # small reads/writes (headers, configs) are not a data path
            return None
        op = "read" if e.name in READ_SYS else "write"
        ret, lat = a[5], a[6]
        if ret is not None and ret >= 1 << 63:
            ret -= 1 << 64
        ev = [f"{e.name} fd {a[0]} into host memory {a[1]:#x} (no cuFile call around it)"]
        conf = "low"
        copies = self.memcpy.get(e.pid)
        if copies:
            near = [c for c in copies if abs(c.ts - e.ts) <= HOLD_NS]
            if op == "read":
                near = [c for c in near if c.ts >= e.ts]
            else:
                near = [c for c in near if c.ts <= e.ts]
            if near:
                conf = "high"
                ev.append(f"CUDA copy of {near[0].args[2] if len(near[0].args) > 2 else '?'} bytes "
                          f"{'after' if op == 'read' else 'before'} it")
        if conf == "low":
            ev.append("no CUDA copy seen next to it (libcuda not probed or no GPU): host-memory staging")
        # pread64/pwrite64 carry a byte count; the v-forms an iovec count: the return says the bytes
        size = ret if ret is not None and ret >= 0 else (a[2] if e.name in ("pread64", "pwrite64") else 0)
        return IoVerdict(e.ts, e.pid, e.tid, e.comm, e.name, op, path, a[3], size, ret, lat, DRAM_BOUNCE, None, conf, ev)


def classify(events: list[Event], path_filter: str | None = None) -> list[IoVerdict]:
    """The whole stream at once (replay): events are ordered by time first."""
    c = Classifier(path_filter)
    for e in sorted(events, key=lambda e: e.ts):
        c.feed(e)
    c.flush()
    verdicts = c.drain()
    if c.path_filter:
        verdicts = [v for v in verdicts if v.path is None or c._path_ok(v.path)]
    return verdicts


# -- summaries ------------------------------------------------------------------------------------

def log2_hist(values_us: list[float]) -> list[tuple[int, int, int]]:
    """(low, high, count) buckets of powers of two in µs, like bcc's biolatency."""
    if not values_us:
        return []
    buckets: dict[int, int] = {}
    for v in values_us:
        b = 0 if v < 1 else int(math.log2(v)) + 1
        buckets[b] = buckets.get(b, 0) + 1
    hi = max(buckets)
    return [((0 if b == 0 else 1 << (b - 1)), (1 << b) - 1, buckets.get(b, 0)) for b in range(0, hi + 1)]


def summarize(verdicts: list[IoVerdict]) -> dict:
    from ..sweep.latency import percentile
    out = {}
    for r in ROUTES:
        vs = [v for v in verdicts if v.route == r]
        if not vs:
            continue
        lats = sorted(v.latency_ns / 1000 for v in vs if v.latency_ns is not None)
        out[r] = {"count": len(vs), "bytes": sum(max(v.size, 0) for v in vs),
                  "subtypes": sorted({v.subtype for v in vs if v.subtype}),
                  "p50_us": percentile(lats, 50), "p99_us": percentile(lats, 99),
                  "hist_us": log2_hist(lats)}
    return out
