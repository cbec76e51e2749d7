"""One sweep point: workers behind one small interface, started together, watched, and judged.

The interface is ``Engine`` (below; fio's ioengine_ops, in Python): one object per mode, listed in
gdsdiag/sweep/engines/__init__.py's ``ENGINES``. What a mode is (GPU or not, cuFile or not, queued
or not), what its point's workers share (``open_point``/``close_point``: a cuFile handle…), its
workers (``worker``: a ``Worker`` with ``prepare()`` in its own thread — buffers, registration, the
CUDA context made current — ``run()``, the timed loop, and ``close()``), the route its I/O took
(``route_start``/``route_end``), and what only it adds to a point's figures. The sweep's runner
asks the engine and never names a mode.
``Worker.native`` says whether ``run`` is the C loop (csrc/ioloop.c, GIL released for the whole
point) or the Python loop here (``pyloop``), which keeps its state in the same ``struct gd_job``.

A point never lies. The clock starts at a barrier that every worker reaches after its setup, so
setup is never timed; then the point is judged (``judge``) and is an error, not a number, when a
worker did not run or completed no I/O, when fewer than MIN_OPS I/Os completed, or when a worker
waited longer than max(1 s, 10 × p99) for a completion (a stall). Verification happens in the
loop but outside each I/O's latency, and its cost is reported.

Threads by default: Python threads calling the C loop with the GIL released. A CUDA context
is current per thread and cuFile handles/buffer registrations are per process, so each worker
sets up in its own thread of the one process that holds the registrations, as an application does.
``--workers process`` runs the same workers each in a process of its own, as fio's default forked
jobs (processes.py: fresh processes, their results merged by the same ``_collect`` and ``judge``).
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from ...errors import EXIT_FAIL, GdsdiagError, UsageError
from ...routes import Route, RouteMix, RouteShares, mix_json, mix_of, route_of, shares
from ...units import size_text
from .. import native
from ..files import HEADER_SIZE, SweepFile

MIN_OPS = 16  # fewer completed I/Os than this in a point is not a measurement
STALL_FLOOR_NS = 1_000_000_000
SETUP_TIMEOUT_S = 120.0
_abandoned: list = []  # workers stuck in an I/O: their buffers must outlive the thread
# struct gd_job's results and live state, zeroed after a worker's warm-up read
RESULT_FIELDS = tuple(
    "ops bytes t_start_ns t_end_ns last_done_ns inflight max_gap_ns own_ns lat_min_ns lat_max_ns lat_sum_ns "
    "verify_ns verified_bytes err_kind err err_ret err_offset err_aux".split()
)


class VerifyError(GdsdiagError):
    exit_code = EXIT_FAIL


class PointError(GdsdiagError):
    """The point produced no trustworthy number (the reason is the cause)."""


@dataclass
class PointSpec:
    mode: str  # host | bounce | cufile | cufile-async | cufile-batch | kvikio
    rw: str  # read | write | randread | randwrite
    bs: int
    threads: int
    seconds: float | None = None
    total_bytes: int | None = None
    verify: bool = True
    gpu: int = 0
    iodepth: int = 1
    pool_threads: int | None = None  # kvikio: its thread pool size (the requested --threads)
    task_size: int | None = None  # kvikio / batch: the requested --bs of each request
    buffers: str = "huge"  # host buffers: "huge" (2 MiB-aligned, MADV_HUGEPAGE) or "pages" (fio's)
    workers: str = "thread"  # "thread": threads of this process; "process": one process each (processes.py)

    @property
    def is_read(self) -> bool:
        return self.rw in ("read", "randread")

    @property
    def is_random(self) -> bool:
        return self.rw.startswith("rand")


@dataclass
class PointResult:
    hist: list = field(default_factory=list)  # GD_HIST_N latency buckets (ns), all workers
    ops: int = 0
    nbytes: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    verified_bytes: int = 0
    verify_seconds: float = 0.0  # generating/checking data, summed over workers
    lat_min_ns: int = 0
    lat_max_ns: int = 0
    lat_sum_ns: int = 0
    max_gap_ns: int = 0
    written: object = None  # bitmap of blocks written (write points with verify)
    loop: dict = field(default_factory=dict)  # {"kind": "c"|"python", "engine": ..., "why": ...}
    workers: list = field(default_factory=list)
    route: Any = None  # RouteSeen merged from worker processes' own counters (None: the engine's, here)


def validate(spec: PointSpec, size: int) -> None:
    """Arguments that would make a point meaningless, refused before any I/O (exit 4)."""
    if spec.threads < 1:
        raise UsageError(f"--threads {spec.threads}: a point needs at least one thread", "use e.g. --threads 1,4,16")
    if spec.iodepth < 1:
        raise UsageError(f"--iodepth {spec.iodepth}: needs at least 1", "use e.g. --iodepth 1 or 32")
    if spec.seconds is not None and not spec.seconds > 0:
        raise UsageError(f"--time {spec.seconds:g}s: a point must last more than 0 s", "use e.g. --time 10s")
    if spec.bs <= 0 or spec.bs % 4096:
        raise UsageError(
            f"block size {spec.bs} is not a positive multiple of 4 KiB (O_DIRECT alignment)", "use 4k, 64k, 1m…"
        )
    if size < spec.threads * spec.bs * spec.iodepth:
        raise UsageError(
            f"file size {size} is smaller than threads × iodepth × bs = {spec.threads * spec.iodepth * spec.bs}",
            "raise --size or lower --threads/--bs/--iodepth",
        )
    if spec.total_bytes is not None:
        if spec.total_bytes < MIN_OPS * spec.bs or spec.total_bytes < spec.threads * spec.bs:
            raise UsageError(
                f"--bytes {spec.total_bytes} is fewer than max({MIN_OPS}, threads) blocks of {spec.bs}",
                f"give --bytes at least {max(MIN_OPS, spec.threads) * spec.bs}",
            )


@dataclass(frozen=True)
class FioJob:
    """fio's job that stands for a mode's point under --compare-fio (gdsdiag/sweep/fio.py runs it)."""

    cuda_io: str | None  # fio's libcufile engine with this --cuda_io (cufile | posix); None: psync / io_uring
    api: str | None = None  # the cuFile API the mode calls where fio's libcufile calls cuFileRead/cuFileWrite
    buffer_memory: str | None = None  # what its host buffers are where fio's are pageable (bounce: pinned)

    @property
    def host_buffers(self) -> bool:
        """The I/O lands in host memory (fio's psync, libcufile's posix): 4 KiB pages like fio's."""
        return self.cuda_io != "cufile"


class Engine(Protocol):
    """One mode of the sweep (the registry: engines/__init__.py ``ENGINES``)."""

    mode: str  # its --mode name
    gpu: bool  # needs cupy and a CUDA GPU
    cufile: bool  # goes through libcufile: the sweep opens the cuFile driver (and its statistics) first
    queued: bool  # takes --iodepth > 1 (I/Os in flight per worker)
    uring: bool  # its --iodepth > 1 is io_uring (needs linux/io_uring.h at build time)
    ceiling: bool  # its result is a ceiling of the other modes' same point (host)
    processes: bool  # its workers can each run in a process of their own (--workers process)
    route: Route | None  # the route it takes by its design (host: HOST); None: cuFile's counters say
    design: str  # that design in words, for a point's why ("" where the counters decide)
    fio: FioJob | None  # fio's equivalent job (--compare-fio); None: fio has none

    def adapt(self, spec: PointSpec, size: int) -> PointSpec:
        """The point as the engine runs it (kvikio: one worker of threads × bs requests)."""
        ...

    def open_point(self, point: Point) -> None: ...

    def close_point(self, point: Point) -> None: ...

    def worker(self, point: Point, idx: int) -> Worker: ...

    def route_start(self) -> Any:
        """Counters before the point (cuFile's own), handed back to ``route_end``."""
        ...

    def route_end(self, start: Any) -> RouteSeen:
        """The route of the point's I/O: its mix, detail and warning."""
        ...

    def summarize(self, summary: dict, spec: PointSpec, res: PointResult) -> None:
        """What only this engine adds to or corrects in a point's figures (in place)."""
        ...

    def written_unit(self, spec: PointSpec) -> int:
        """The size of the blocks a write point's bitmap counts (``spec`` as requested)."""
        ...

    def error_note(self) -> str:
        """What to add to a point error's line (cuFile: the compat pool in effect)."""
        ...

    def design_for(self, route: Route) -> str:
        """What the mode does by its design where that alone decides a point's ``route``, for its
        why: ``design`` (host, bounce), or what a counted mode did when its point counted nothing
        (kvikio: its own POSIX path); "" where cuFile's counters decide."""
        ...


class RouteSeen(NamedTuple):
    """What a point's route was, as its engine measured it: a mix over the one route vocabulary
    (gdsdiag/routes.py), never a label."""

    mix: RouteMix  # I/Os per Route as counted (cuFile's statistics); {}: nothing counted
    detail: dict  # route_detail: the counters it was read from
    warning: str | None
    uncounted: Route = Route.UNKNOWN  # the route when nothing was counted: the engine's by design

    def shares(self) -> RouteShares:
        """The point's route: the counted mix as shares, else all of it by ``uncounted``."""
        return shares(self.mix) or {self.uncounted: 1.0}

    def to_json(self) -> list:
        """As a worker process hands it to the sweep (processes.py)."""
        return [mix_json(self.mix), self.detail, self.warning, self.uncounted.value]

    @classmethod
    def from_json(cls, v: list) -> RouteSeen:
        return cls(mix_of(v[0] or {}), v[1] or {}, v[2], route_of(v[3]))


class EngineDefaults:
    """What most engines do; an engine overrides what it does differently."""

    mode: str  # each engine's own
    gpu = False
    cufile = False
    queued = False
    uring = False
    ceiling = False
    processes = True
    route: Route | None = Route.HOST
    design = ""
    fio: FioJob | None = None

    def adapt(self, spec: PointSpec, size: int) -> PointSpec:
        return spec

    def open_point(self, point: Point) -> None:
        pass

    def close_point(self, point: Point) -> None:
        pass

    def route_start(self) -> Any:
        return None

    def route_end(self, start: Any) -> RouteSeen:
        return RouteSeen({}, {}, None, self.route or Route.UNKNOWN)

    def summarize(self, summary: dict, spec: PointSpec, res: PointResult) -> None:
        pass

    def written_unit(self, spec: PointSpec) -> int:
        return spec.bs

    def error_note(self) -> str:
        return ""

    def design_for(self, route: Route) -> str:
        return self.design


class Point:
    """What the workers of one point share: spec, file, the stop flag, the byte budget, the
    written-blocks bitmap, and the engine's own objects (``shared``)."""

    def __init__(self, spec: PointSpec, sf: SweepFile, native_ok: bool = True):
        self.spec, self.sf = spec, sf
        self.ffi = native.ffi()
        self.lib: Any = None
        self.why: str | None = None
        if native_ok:
            self.lib, self.why = native.load()
        self.stop = self.ffi.new("int *")
        # --bytes is split between the workers up front (fio's per-job io_size): a shared budget
        # let one fast worker take it all and leave another with nothing to do
        self.budget = self.ffi.NULL
        self.blocks = sf.size // spec.bs
        self.written = None
        if not spec.is_read and spec.verify:
            import numpy as np

            self.written = np.zeros((self.blocks + 7) // 8, dtype=np.uint8)
        self.shared: dict = {}
        self.t0_ns = 0


class Worker:
    native = True  # run() is the C loop; a fallback sets it False
    engine_name = "psync"

    def __init__(self, point: Point, idx: int):
        self.point, self.spec, self.sf, self.idx = point, point.spec, point.sf, idx
        self.times: dict[str, int] = {}  # monotonic ns of each setup/run step (GDSDIAG_SWEEP_DEBUG)
        import numpy as np

        f = point.ffi
        self.hist = np.zeros(4096, dtype=np.uint64)
        self._hist_c = f.from_buffer(self.hist)
        j = self.job = f.new("struct gd_job *")
        s = self.spec
        j.is_write = 0 if s.is_read else 1
        j.random = 1 if s.is_random else 0
        j.verify = 1 if s.verify else 0
        j.iodepth = s.iodepth
        j.fd = self.sf.fd
        j.bs = s.bs
        j.data_base = HEADER_SIZE
        blocks = point.blocks
        per = max(blocks // s.threads, 1)
        j.slice_start = (idx * per) % blocks
        j.slice_blocks = per  # fio's offset_increment: equal slices, the tail unused
        j.file_blocks = blocks
        j.seed = self.sf.seed
        j.rng = (self.sf.seed * 1000003 + idx * 7919 + 1) & 0xFFFFFFFFFFFFFFFF or 1
        j.budget = point.budget
        if s.total_bytes:
            total_ops = s.total_bytes // s.bs
            j.max_ops = total_ops // s.threads + (1 if idx < total_ops % s.threads else 0)
        j.stop = point.stop
        j.hist = f.cast("uint64_t *", self._hist_c)
        if point.written is not None:
            self._written_c = f.from_buffer(point.written)
            j.written = f.cast("uint8_t *", self._written_c)
        self.setup_error: str | None = None
        self.run_error: str | None = None
        self.keep: list = []  # objects the C loop points into

    # --- the interface ---------------------------------------------------------------------------
    def prepare(self) -> None:
        pass

    def run(self) -> None:
        if self.native and self.point.lib is not None:
            self.point.lib.gd_run(self.job)
        else:
            pyloop(self)

    def close(self) -> None:
        pass

    warm: dict = {}  # fields the warm-up read sets besides these (cufile: the read function)

    def warmup(self) -> None:
        """One untimed read at the worker's first offset, before the barrier: first-use costs
        (libcufile's lazy compat buffers, kvikio opening the driver, first touch of fresh
        buffers) are setup, and would otherwise read as a stall or slow the first point."""
        j, lib = self.job, self.point.lib
        first = int(j.slice_start) * self.spec.bs
        if not (self.native and lib is not None):
            # also the first use of the pattern kernels (cupy compiles them then)
            if self.spec.is_read:
                self.io(0, first)
                if self.spec.verify:
                    self.check(0, first)
            elif self.spec.verify:
                self.fill(0, first)
            return
        over = {"is_write": 0, "verify": 0, "max_ops": 1, "random": 0, "deadline_ns": 0, **self.warm}
        saved = {k: getattr(j, k) for k in over}
        for k, v in over.items():
            setattr(j, k, v)
        try:
            lib.gd_run(j)
            err = int(j.err_kind)
            what = describe_error(PointSpec(self.spec.mode, "read", self.spec.bs, 1), j) if err else ""
        finally:
            for k, v in saved.items():
                setattr(j, k, v)
            for name in RESULT_FIELDS:
                setattr(j, name, 0)
            self.hist[:] = 0
        if err:
            raise GdsdiagError(f"warm-up read failed: {what}")

    # --- the Python loop's hooks (fallback, and the modes without a C loop) ----------------------
    def io(self, slot: int, off: int) -> int:
        raise NotImplementedError

    def fill(self, slot: int, off: int) -> None:
        raise NotImplementedError

    def check(self, slot: int, off: int) -> int | None:
        raise NotImplementedError

    @property
    def loop_name(self) -> str:
        if self.native and self.point.lib is not None:
            return f"c {self.engine_name}" + (f" iodepth {self.spec.iodepth}" if self.spec.iodepth > 1 else "")
        return "python"

    def release(self) -> None:
        f = self.point.ffi
        for name in ("_hist_c", "_written_c"):
            c = self.__dict__.pop(name, None)
            if c is not None:
                f.release(c)


def bucket(v: int) -> int:
    """csrc/ioloop.c's hist_bucket: exact below 128 ns, then 64 buckets per power of two."""
    if v < 128:
        return v
    msb = v.bit_length() - 1
    return (msb - 5) * 64 + ((v >> (msb - 6)) & 63)


def pyloop(w: Worker) -> None:
    """The timed loop in Python, for modes without a C loop and where the C loop cannot be built.
    Same stop rules, same fields as gd_run; one I/O at a time."""
    j, spec, point = w.job, w.spec, w.point
    now = time.monotonic_ns
    j.t_start_ns = j.last_done_ns = j.t_end_ns = now()
    rng = random.Random(j.rng)
    bs, blocks = spec.bs, point.blocks
    seq = 0
    issued = 0
    hist = w.hist
    ops = nbytes = lat_sum = lat_max = 0
    lat_min = 0
    max_gap = 0
    last = j.t_start_ns
    verify_ns = verified = 0
    own_after = 0
    budget = point.budget
    written = point.written
    stop = point.stop
    deadline = j.deadline_ns
    try:
        while True:
            if stop[0] or (deadline and now() >= deadline) or (j.max_ops and issued >= j.max_ops):
                break
            if budget != point.ffi.NULL:
                with _budget_lock:
                    budget[0] -= bs
                    if budget[0] < 0:
                        break
            block = rng.randrange(blocks) if spec.is_random else j.slice_start + seq % j.slice_blocks
            seq += 1
            off = block * bs
            own = 0
            if not spec.is_read and spec.verify:
                t = now()
                w.fill(0, off)
                own = now() - t
                verify_ns += own
            issued += 1
            j.inflight = 1
            t = now()
            n = w.io(0, off)
            t1 = now()
            j.inflight = 0
            if n != bs:
                _fail(j, 2, 0, n, off)
                break
            lat = t1 - t
            hist[bucket(lat)] += 1
            lat_min = lat if not lat_min or lat < lat_min else lat_min
            lat_max = max(lat_max, lat)
            lat_sum += lat
            max_gap = max(max_gap, t1 - last - own - own_after)  # our own checks are not the storage's silence
            own_after = 0
            last = t1
            ops += 1
            nbytes += n
            j.last_done_ns = t1
            j.bytes = nbytes
            if spec.verify:
                if spec.is_read:
                    t = now()
                    bad = w.check(0, off)
                    own_after = now() - t
                    verify_ns += own_after
                    if bad is not None:
                        _fail(j, 3, 0, 0, bad)
                        break
                    verified += n
                elif written is not None:
                    written[block >> 3] |= 1 << (block & 7)
    except OSError as e:
        _fail(j, 1, e.errno or 5, -1, 0)
    finally:
        j.inflight = 0
        j.ops, j.bytes, j.t_end_ns = ops, nbytes, last
        j.lat_min_ns, j.lat_max_ns, j.lat_sum_ns, j.max_gap_ns = lat_min, lat_max, lat_sum, max_gap
        j.verify_ns, j.verified_bytes = verify_ns, verified


_budget_lock = threading.Lock()


def _fail(j, kind: int, err: int, ret: int, off: int) -> None:
    if not j.err_kind:
        j.err_kind, j.err, j.err_ret, j.err_offset = kind, err, ret, off
    j.stop[0] = 1


def run_workers(engine: Engine, spec: PointSpec, sf: SweepFile, progress=None) -> PointResult:
    """Set up, start together, watch, collect and judge one point."""
    import psutil

    sf.check_same()  # run_point validated the requested spec (an engine may adapt it)
    point = Point(spec, sf)
    try:
        engine.open_point(point)
    except GdsdiagError:
        raise
    except Exception as e:  # a cuFile/CUDA error registering the file: this point's error, named
        raise PointError(
            f"{spec.mode} {spec.rw} bs={size_text(spec.bs)}: setup failed: {type(e).__name__}: {e}",
            "for cuFile errors run `gdsdiag check --path DIR`; the cause is named above",
        ) from None
    workers = [engine.worker(point, i) for i in range(spec.threads)]
    n = len(workers)

    def start():  # runs once, in the last thread to reach the barrier
        point.t0_ns = time.monotonic_ns()
        dl = point.t0_ns + int(spec.seconds * 1e9) if spec.seconds else 0
        for w in workers:
            w.job.deadline_ns = dl
        if any(w.setup_error for w in workers):
            point.stop[0] = 1

    barrier = threading.Barrier(n + 1, action=start)

    def body(w: Worker) -> None:
        w.times = {"begin": time.monotonic_ns()}
        try:
            w.prepare()
            w.times["prepared"] = time.monotonic_ns()
            w.warmup()
            w.times["warm"] = time.monotonic_ns()
        except GdsdiagError as e:
            w.setup_error = e.cause
        except Exception as e:  # a cuFile or CUDA error during setup: keep its name
            w.setup_error = f"{type(e).__name__}: {e}"
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            w.setup_error = w.setup_error or "the point was abandoned before it started"
        w.times["started"] = time.monotonic_ns()
        try:
            if w.setup_error is None and not point.stop[0]:
                w.run()
            w.times["ran"] = time.monotonic_ns()
        except GdsdiagError as e:
            w.run_error = e.cause
            point.stop[0] = 1
        except Exception as e:  # a worker thread's failure of any kind ends its point as an ERROR, named
            w.run_error = f"{type(e).__name__}: {e}"
            point.stop[0] = 1
        finally:
            try:
                w.close()
            except Exception as e:  # (the same for its cleanup: the point's error names it)
                w.run_error = w.run_error or f"cleanup: {type(e).__name__}: {e}"

    threads = [
        threading.Thread(target=body, args=(w,), daemon=True, name=f"gdsdiag-sweep-{i}") for i, w in enumerate(workers)
    ]
    proc = psutil.Process()
    stuck: list[str] = []
    try:
        for t in threads:
            t.start()
        try:
            barrier.wait(timeout=SETUP_TIMEOUT_S)
        except threading.BrokenBarrierError:
            point.stop[0] = 1
            raise PointError(
                f"{spec.mode}: worker setup did not finish in {SETUP_TIMEOUT_S:.0f} s",
                "see `gdsdiag check`; a cuFile registration may hang on this node",
            ) from None
        cpu0 = sum(proc.cpu_times()[:2])
        stuck = _watch(point, workers, threads, progress)
        cpu = sum(proc.cpu_times()[:2]) - cpu0
    except BaseException:
        point.stop[0] = 1  # Ctrl-C: the C loops return after their current I/O
        barrier.abort()  # and workers still waiting to start are released
        for t in threads:
            t.join(10)
        raise
    finally:
        if not stuck:
            engine.close_point(point)
    if stuck:
        _abandoned.append((point, workers))
        raise PointError(f"{spec.mode} {spec.rw} bs={size_text(spec.bs)}: " + "; ".join(stuck), _stall_fix(spec))
    res = _collect(point, workers, cpu)
    if os.environ.get("GDSDIAG_SWEEP_DEBUG"):
        _log_workers(spec, point, workers)
    for w in workers:
        w.release()
    judge(spec, res, workers, sf.size)
    return res


def _watch(point: Point, workers: list, threads: list, progress) -> list[str]:
    """Wait for the workers, feeding progress; past the deadline plus a grace, stop them, and name
    any still stuck inside one I/O (they are left behind, their buffers kept)."""
    spec = point.spec
    grace_ns = int(max(10.0, 2 * (spec.seconds or 0)) * 1e9)
    last_bytes = 0
    quiet_since = time.monotonic_ns()
    stop_at = None
    while True:
        alive = [t for t in threads if t.is_alive()]
        if not alive:
            break
        alive[0].join(0.1)
        now = time.monotonic_ns()
        total = sum(int(w.job.bytes) for w in workers)
        if total != last_bytes:
            if progress:
                progress(total - last_bytes)
            quiet_since = now
            last_bytes = total
        dl = int(workers[0].job.deadline_ns)
        late = (dl and now > dl + grace_ns) or (not dl and now - quiet_since > max(grace_ns, 60_000_000_000))
        if late and stop_at is None:
            point.stop[0] = 1
            stop_at = now
        if stop_at is not None and now - stop_at > 5_000_000_000:
            out = []
            for w, t in zip(workers, threads):
                if t.is_alive():
                    since = (now - int(w.job.last_done_ns)) / 1e9
                    out.append(
                        f"worker {w.idx} stuck in one I/O: no completion for {since:.1f} s ({int(w.job.ops)} I/Os done)"
                    )
            if out:
                return out
    total = sum(int(w.job.bytes) for w in workers)
    if progress and total != last_bytes:
        progress(total - last_bytes)
    return []


def _collect(point: Point, workers: list, cpu: float) -> PointResult:
    import numpy as np

    res = PointResult(written=point.written)
    hist = np.zeros(4096, dtype=np.uint64)
    t_end = point.t0_ns
    mins = []
    for w in workers:
        j = w.job
        hist += w.hist
        res.ops += int(j.ops)
        res.nbytes += int(j.bytes)
        res.verified_bytes += int(j.verified_bytes)
        res.verify_seconds += int(j.verify_ns) / 1e9
        res.lat_sum_ns += int(j.lat_sum_ns)
        res.lat_max_ns = max(res.lat_max_ns, int(j.lat_max_ns))
        if j.lat_min_ns:
            mins.append(int(j.lat_min_ns))
        res.max_gap_ns = max(res.max_gap_ns, int(j.max_gap_ns))
        t_end = max(t_end, int(j.t_end_ns))
        res.workers.append({"ops": int(j.ops), "max_gap_ms": round(int(j.max_gap_ns) / 1e6, 3)})
    res.lat_min_ns = min(mins) if mins else 0
    res.hist = hist
    res.seconds = max(t_end - point.t0_ns, 0) / 1e9
    res.cpu_seconds = cpu
    w0 = workers[0]
    from ..files import BUFFER_NAMES

    res.loop = {
        "kind": "c" if w0.loop_name.startswith("c ") else "python",
        "engine": w0.loop_name,
        "buffers": BUFFER_NAMES[point.spec.buffers],
        "workers": point.spec.workers,
    }
    res.loop.update(getattr(w0, "loop_extra", {}))
    if res.loop["kind"] == "python":
        res.loop["why"] = point.why or f"{point.spec.mode} has no C loop"
    return res


def _stall_fix(spec: PointSpec) -> str:
    if spec.mode.startswith("cufile") or spec.mode == "kvikio":
        return (
            "in compatibility mode libcufile bounces through its POSIX buffer pool, which stalls when exhausted: "
            "raise properties.posix_pool_slab_count (for the slab size that holds bs, properties.posix_pool_slab_size_kb) "
            "in cufile.json, or lower --threads; `gdsdiag check` shows the pool"
        )
    return "the storage stopped answering: check dmesg and the device"


def _log_workers(spec: PointSpec, point: Point, workers: list) -> None:
    """GDSDIAG_SWEEP_DEBUG=1: what each worker did and when, relative to the point's start (the
    timer starts when the last worker is ready), on stderr. For a point that is slow, short or
    empty, this says whether the time went to setup (CUDA context, registration, the warm-up I/O)
    or to the I/O itself. A debugging aid, so it bypasses the renderers."""
    import sys

    t0 = point.t0_ns or 0

    def at(w: Worker, name: str) -> str:
        t = w.times.get(name)
        return "-" if t is None or not t0 else f"{(t - t0) / 1e6:+.1f}"

    for w in workers:
        j = w.job
        sys.stderr.write(
            f"gdsdiag sweep worker {w.idx} [{spec.mode} {spec.rw} bs={size_text(spec.bs)} qd={spec.iodepth}]: "
            f"setup {at(w, 'begin')} ms, prepared {at(w, 'prepared')}, warm-up done {at(w, 'warm')}, "
            f"released {at(w, 'started')}, loop returned {at(w, 'ran')}; ops {int(j.ops)}, "
            f"latency max {int(j.lat_max_ns) / 1e3:.0f} us, longest silence {int(j.max_gap_ns) / 1e3:.0f} us, "
            f"error kind {int(j.err_kind)}{'' if w.setup_error is None else ', setup: ' + str(w.setup_error)}\n"
        )


def mismatch_origin(spec: PointSpec, j, data_size: int | None) -> str:
    """What the wrong bytes are, when the C loop kept them (err = slot + 1, err_ret = the word found,
    err_aux = the slot's previous I/O): a block of this file from elsewhere, this slot's previous
    block (data that had not arrived when the I/O reported completion), or bytes no pattern of this
    file holds (zeros, garbage, another file)."""
    from .. import pattern

    if not int(j.err) or not data_size:
        return ""
    bad, word = int(j.err_offset), int(j.err_ret) & ((1 << 64) - 1)
    word_at = bad - bad % 8
    slot = f"slot {int(j.err) - 1}" if spec.iodepth > 1 else "the worker"
    prev = int(j.err_aux)
    src = pattern.word_origin(word, j.seed)
    if src >= data_size:
        what = "zeros" if word == 0 else f"0x{word:016x}"
        return f"; the word there is {what}, which is no part of this file's data"
    shift = src - word_at
    block = bad - bad % spec.bs
    if shift % spec.bs == 0:
        moved = f"the block at data offset {block + shift} ({shift // spec.bs:+d} blocks)"
    else:
        moved = f"data offset {src + bad % 8} (shifted {shift:+d} bytes)"
    if prev >= 0 and src == prev + (word_at - block):
        return f"; it holds {moved}, which {slot} read before: the I/O reported completion before its data reached the buffer"
    last = f"{slot}'s previous I/O was data offset {prev}" if prev >= 0 else f"it was {slot}'s first I/O"
    return f"; it holds {moved} ({last})"


def judge(spec: PointSpec, res: PointResult, workers: list, data_size: int | None = None) -> None:
    """Raise when the point has no trustworthy number (the order: wrong data, failed I/O, a worker
    that did not run, too few I/Os, a stall)."""
    from ..latency import hist_percentile

    where = f"{spec.mode} {spec.rw} bs={size_text(spec.bs)} threads={spec.threads}"
    for w in workers:
        j = w.job
        if j.err_kind == 3:
            raise VerifyError(
                f"{where}: data mismatch at file offset {HEADER_SIZE + int(j.err_offset)} "
                f"(data offset {int(j.err_offset)}){mismatch_origin(spec, j, data_size)}",
                "the data read back differs from what was written: check the storage and the path",
            )
    for w in workers:
        j = w.job
        if j.err_kind:
            raise PointError(f"{where}: worker {w.idx}: {describe_error(spec, j)}", _error_fix(spec, j))
        if w.run_error:
            raise PointError(
                f"{where}: worker {w.idx}: {w.run_error}",
                "for cuFile errors run `gdsdiag check --path DIR`; the cause is named above",
            )
    for w in workers:
        if w.setup_error:
            raise PointError(
                f"{where}: worker {w.idx} did not run: {w.setup_error}",
                "for cuFile errors run `gdsdiag check --path DIR`; the cause is named above",
            )
        if int(w.job.ops) == 0:
            raise PointError(
                f"{where}: worker {w.idx} completed no I/O (it did not run)",
                "a point where a worker did not run has no number; " + _stall_fix(spec),
            )
    unit = spec.task_size or spec.bs  # kvikio/batch requests count in requested blocks
    if res.nbytes // unit < MIN_OPS:
        raise PointError(
            f"{where}: only {res.nbytes // unit} I/Os of {unit} bytes completed in {res.seconds:.2f} s (fewer than {MIN_OPS}): not a measurement",
            "lengthen --time or --bytes; if the I/Os stalled: " + _stall_fix(spec),
        )
    p99 = hist_percentile(res.hist, 99) or 0
    limit = max(STALL_FLOOR_NS, 10 * p99)
    if res.max_gap_ns > limit:
        slow = max(workers, key=lambda w: int(w.job.max_gap_ns))
        raise PointError(
            f"{where}: stall: worker {slow.idx} had no completion for {res.max_gap_ns / 1e9:.2f} s "
            f"(p99 latency {p99 / 1e6:.2f} ms; limit max(1 s, 10 × p99))",
            _stall_fix(spec),
        )


def describe_error(spec: PointSpec, j) -> str:
    kind, err, off = int(j.err_kind), int(j.err), int(j.err_offset)
    op = "read" if spec.is_read else "write"
    if kind == 1:
        if spec.mode.startswith("cufile") and err > 5000:
            from ...cufile.errors import OP_ERRORS

            name, text = OP_ERRORS.get(err, (f"cuFile error {err}", ""))
            return f"{op} at data offset {off} failed: {name} ({text})"
        import errno as E

        name = E.errorcode.get(err, str(err))
        return f"{op} at data offset {off} failed: {name} ({os.strerror(err)})"
    if kind == 2:
        return f"short {op} at data offset {off}: {int(j.err_ret)} of {spec.bs} bytes"
    if kind == 4:
        return f"CUDA copy failed (CUresult {err}) at data offset {off}"
    if kind == 6:
        return f"a CUDA stream call failed (CUresult {err}) at data offset {off}"
    if kind == 5:
        return f"the I/O loop could not start: {os.strerror(err)} (io_uring unavailable?)"
    return f"error kind {kind}"


def _error_fix(spec: PointSpec, j) -> str:
    import errno as E

    if int(j.err_kind) == 1 and int(j.err) in (E.ENOSPC, E.EDQUOT):
        return "no space left (ENOSPC): free space on the filesystem or lower --size"
    if int(j.err_kind) == 5:
        return "run without --iodepth (psync), or on a kernel with io_uring enabled"
    return "for cuFile errors run `gdsdiag check --path DIR`; the cause is named above"
