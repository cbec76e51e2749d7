"""cufile, cufile-batch, cufile-async: cuFile on a registered GPU buffer of iodepth × bs bytes, the
I/O loop in C (csrc/ioloop.c) calling libcufile through the function pointers of the copy
gdsdiag.cufile loaded. The file handle is registered once per point on the sweep file's own
descriptor (never re-opened by path). The three modes differ only in the API and its queue:

- ``cufile``: cuFileRead/cuFileWrite, one I/O at a time per worker (as fio's libcufile engine);
- ``cufile-batch``: cuFileBatchIOSubmit/GetStatus, ``--iodepth`` requests of ``--bs`` in flight per
  worker, each in its own batch handle (set up for one request and resubmitted only after it
  completed: a handle takes one submit at a time, as kvikio's BatchHandle documents); the oldest is waited for, younger ones already complete are reaped with it;
- ``cufile-async``: cuFileReadAsync/WriteAsync, ``--iodepth`` registered CUDA streams per worker,
  one request each; the oldest stream is synchronised, younger ones already done are reaped.

Every byte is checked after the I/O (a copy of the slot to host, outside its latency). Written
data is generated into a pinned host buffer and copied to the slot before the write is issued;
pinned, so the copy has finished when cuMemcpyHtoD returns (a pageable source may still be in
flight then, and a write issued on another stream could send stale bytes)."""

from __future__ import annotations

import os
from typing import Any

from ...errors import GdsdiagError
from ...routes import Route, mix_of
from ..files import HEADER_SIZE, host_buffer
from . import gpu
from .base import EngineDefaults, FioJob, Point, RouteSeen
from .base import Worker as _Worker


def probe_driver() -> None:
    """cuFileDriverOpen tried in a child process first (it can hang: cufile.probe), refused with its cause."""
    from ... import cufile

    probe = cufile.probe_driver_open(timeout_s=60)
    if not probe["ok"]:
        raise GdsdiagError(
            f"cuFile driver does not open: {probe.get('error')}",
            "run 'gdsdiag check' for the cause, or drop --mode cufile,kvikio",
        )


def open_driver(probe: bool = True) -> Any:
    """The cuFile driver for the whole sweep (or one worker process: ``probe=False``, its sweep
    probed once), with level-3 statistics started (the per-GPU route counters need the level set
    before the driver opens); close it after the last point."""
    from ... import cufile

    if probe:
        probe_driver()
    cufile.stats.set_level(3)
    driver = cufile.Driver().open()
    cufile.stats.start()
    return driver


def route_seen(counted: dict, detail: dict, mode: str, uncounted: Route, uncounted_note: str) -> RouteSeen:
    """A point's route from cuFile's counters of it (names as cufile.stats counts them), and the
    warning a route through host memory gets; nothing counted: the engine's ``uncounted`` route."""
    mix = mix_of(counted)
    if not mix:
        return RouteSeen({}, detail, uncounted_note, uncounted)
    warn = None
    compat = mix.get(Route.COMPAT, 0)
    if compat == sum(mix.values()):
        warn = f"{mode} ran in cuFile compatibility mode (POSIX through host bounce buffers), not P2P"
    elif compat:
        share = compat / sum(mix.values())
        warn = f"{mode} ran {share:.0%} of its I/Os in cuFile compatibility mode (POSIX through host bounce buffers)"
    return RouteSeen(mix, detail, warn)


BATCH_COUNTERS = {
    "NVFS": ("batch_nvfs_submit_ops",),
    "P2PDMA": ("batch_p2p_submit_ops",),
    "COMPAT": ("batch_posix_enqueued_ops", "batch_aio_submit_ops", "batch_iouring_submit_ops"),
}


def batch_routes(l1_before: dict, l1_after: dict) -> dict:
    """Batch I/O is not in the per-GPU level-3 counters; level 1 counts batch submissions by path
    (cufile.h 1.15: batch_nvfs/p2p/aio/iouring_submit_ops, batch_posix_enqueued_ops)."""
    out = {}
    for route, keys in BATCH_COUNTERS.items():
        n = sum(l1_after.get(k, {}).get("ok", 0) - l1_before.get(k, {}).get("ok", 0) for k in keys)
        if n:
            out[route] = n
    return out


class CufileRoutes(EngineDefaults):
    """The route of a point through libcufile: its level-3 per-GPU counters before and after."""

    gpu = True
    cufile = True
    route: Route | None = None  # cuFile's counters say (NVFS, P2PDMA, COMPAT, PEER_GPU), not the mode
    uncounted = Route.UNKNOWN  # no cuFile I/O counted: nothing conclusive
    uncounted_note = "no cuFile statistics for this point"
    uncounted_design = ""  # what a point with no cuFile I/O counted did instead (kvikio's own)

    def design_for(self, route: Route) -> str:
        return self.uncounted_design if route == self.uncounted else ""

    def route_start(self) -> Any:
        from ... import cufile

        return cufile.path_mix()

    def route_end(self, start: Any) -> RouteSeen:
        from ... import cufile

        delta = cufile.path_mix().minus(start)
        return self.seen(delta.routes(), {"cufile_stats": delta.to_json()})

    def seen(self, counted: dict, detail: dict) -> RouteSeen:
        return route_seen(counted, detail, self.mode, self.uncounted, self.uncounted_note)

    def error_note(self) -> str:
        """The compat bounce-buffer pool in effect, for a point that stalled or failed."""
        from ... import cufile

        try:
            slabs = cufile.driver.posix_pool_slabs()
            return " (posix pool now: " + ", ".join(f"{kb} KiB × {n}" for kb, n in slabs) + ")"
        except Exception:  # an addition to an error line already being written: never a second error
            return ""


class CufileEngine(CufileRoutes):
    """cufile: cuFileRead/cuFileWrite, one I/O at a time per worker (fio's libcufile engine)."""

    mode = "cufile"
    api = "sync"
    fio: FioJob | None = FioJob("cufile")

    def open_point(self, point: Point) -> None:
        cp = gpu.cupy()
        gpu.make_current(cp, point.spec.gpu)
        from ... import cufile

        point.shared["cp"] = cp
        point.shared["fh"] = cufile.FileHandle(fd=point.sf.fd).register()

    def close_point(self, point: Point) -> None:
        fh = point.shared.pop("fh", None)
        if fh is not None:
            fh.deregister()  # the descriptor stays the sweep's (fd= handles do not close it)

    def worker(self, point: Point, idx: int) -> Worker:
        return Worker(point, idx, self.api)


class CufileBatchEngine(CufileEngine):
    """cufile-batch: batch I/O, --iodepth requests in flight per worker; its route is in level 1."""

    mode = "cufile-batch"
    api = "batch"
    fio: FioJob | None = FioJob("cufile", api="cuFileBatchIOSubmit")
    queued = True

    def route_start(self) -> Any:
        from ... import cufile

        return super().route_start(), cufile.stats.level1()

    def route_end(self, start: Any) -> RouteSeen:
        from ... import cufile

        mix0, l1_0 = start
        detail = super().route_end(mix0).detail
        routes = batch_routes(l1_0, cufile.stats.level1())
        detail["cufile_batch_stats"] = routes
        return self.seen(routes, detail)


class CufileAsyncEngine(CufileEngine):
    """cufile-async: stream-ordered cuFile, --iodepth registered streams per worker."""

    mode = "cufile-async"
    api = "stream"
    fio: FioJob | None = FioJob("cufile", api="cuFileReadAsync/WriteAsync")
    queued = True


def per_thread_handles() -> bool:
    """GDSDIAG_SWEEP_CUFILE_HANDLES=thread: each worker opens the sweep file again (through
    /proc/self/fd, the same inode) and registers its own cuFile handle, as fio's libcufile engine
    does per job; the default is one handle per point, shared by the workers. For the comparison
    of the two (docs/benchmarks.md: cufile 1 MiB x 4 threads)."""
    return os.environ.get("GDSDIAG_SWEEP_CUFILE_HANDLES") == "thread"


ASYNC_BUFFERS = ("shared", "based", "separate")


def async_buffers() -> str:
    """How cufile-async names each slot's GPU memory (GDSDIAG_SWEEP_ASYNC_BUFFERS): ``based`` (the
    default) base = buffer + slot x bs and bufPtr_offset 0, ``separate`` one allocation per slot,
    ``shared`` one base pointer for every slot and bufPtr_offset = slot x bs.

    ``shared`` is what cufile.h allows, but libcufile 1.15 in compatibility mode puts the data of
    concurrent stream requests that share a base pointer into each other's buffers: on the H200
    2 of 2 sweeps at --iodepth 8 read another request's block (+1 to +3 blocks away) and wrote
    another slot's data to disk, at 4 KiB and 1 MiB, with one or two threads, blocking streams or
    not; --iodepth 1, ``based`` and ``separate`` were clean (docs/sweep.md, "cufile-async buffers").
    ``shared`` stays selectable to show it."""
    v = os.environ.get("GDSDIAG_SWEEP_ASYNC_BUFFERS", "based")
    return v if v in ASYNC_BUFFERS else "based"


def _addr(L, fn) -> int:
    return int(L.ffi.cast("uintptr_t", fn))


class Worker(gpu.GpuPattern, _Worker):
    def __init__(self, point: Point, idx: int, api: str = "sync"):
        super().__init__(point, idx)
        self.api = api  # sync | batch | stream
        lib = point.lib
        self.native = lib is not None
        self.engine_name = {"sync": "cufile", "batch": "cufile batch", "stream": "cufile stream"}[self.api]
        if lib is not None:
            self.job.engine = {
                "sync": lib.GD_ENGINE_CUFILE,
                "batch": lib.GD_ENGINE_CUFILE_BATCH,
                "stream": lib.GD_ENGINE_CUFILE_STREAM,
            }[self.api]
        self.reg: Any = None  # cufile.BufferRegistration once prepared
        self.batches: list = []
        self.streams: list = []  # (cupy stream, its cuFile registration)
        self.slot_arrays: list = []  # cufile-async, separate buffers: (cupy array, its registration)
        self.scratch: Any = None  # an mmap host buffer once prepared
        self.pinned = False
        self.own_fd = -1
        self.own_fh: Any = None  # cufile.FileHandle of own_fd (per-thread handles)
        self.loop_extra = {"cufile_handles": "per thread" if per_thread_handles() else "one per point"}

    def prepare(self):
        from ... import cufile

        cp = self.cp = self.point.shared["cp"]
        gpu.make_current(cp, self.spec.gpu)
        spec, f, j = self.spec, self.point.ffi, self.job
        depth = spec.iodepth
        self.gbuf = cp.empty(spec.bs * depth, dtype=cp.uint8)
        self.reg = cufile.BufferRegistration(self.gbuf).register()
        j.gpu_buf = self.gbuf.data.ptr
        if self.api == "batch":
            for _ in range(depth):  # one at a time, so close() destroys those set up before a failure
                self.batches.append(cufile.Batch(1).__enter__())
        if self.api == "stream":
            # GDSDIAG_SWEEP_STREAMS=blocking: streams that synchronise with the legacy default
            # stream (the one the verification copies use), to tell stream-ordering faults apart
            blocking = os.environ.get("GDSDIAG_SWEEP_STREAMS") == "blocking"
            for _ in range(depth):
                s = cp.cuda.Stream(non_blocking=not blocking)
                self.streams.append((s, cufile.StreamRegistration(s).register()))
            self.stream = self.streams[0][0]
        else:
            self.stream = cp.cuda.Stream(non_blocking=True)  # the Python loop's pattern kernels
        if per_thread_handles():
            self.own_fd = os.open(self.sf.proc_path, os.O_RDWR | os.O_DIRECT | os.O_CLOEXEC)
            self.own_fh = cufile.FileHandle(fd=self.own_fd).register()
        if not self.native:
            return
        fh = self.handle
        L = fh.L
        j.cufile_handle = f.cast("void *", int(L.ffi.cast("uintptr_t", fh.handle)))
        read = self.spec.is_read
        if self.api == "sync":
            j.cufile_io = f.cast("void *", _addr(L, L.lib.cuFileRead if read else L.lib.cuFileWrite))
            self.warm = {"cufile_io": f.cast("void *", _addr(L, L.lib.cuFileRead))}
        elif self.api == "batch":
            j.cf_batch_submit = f.cast("void *", _addr(L, L.lib.cuFileBatchIOSubmit))
            j.cf_batch_status = f.cast("void *", _addr(L, L.lib.cuFileBatchIOGetStatus))
            self._queues = f.new("void *[]", [f.cast("void *", _addr(L, b._id[0])) for b in self.batches])
        else:
            j.cf_async_io = f.cast("void *", _addr(L, L.lib.cuFileReadAsync if read else L.lib.cuFileWriteAsync))
            self.warm = {"cf_async_io": f.cast("void *", _addr(L, L.lib.cuFileReadAsync))}
            sync, query = gpu.stream_fns()
            j.cu_stream_sync, j.cu_stream_query = f.cast("void *", sync), f.cast("void *", query)
            self._queues = f.new("void *[]", [f.cast("void *", s.ptr) for s, _ in self.streams])
            layout = async_buffers()
            self.loop_extra["async_buffers"] = layout
            if layout == "based":
                ptrs = [self.gbuf.data.ptr + i * spec.bs for i in range(spec.iodepth)]
            elif layout == "separate":
                for _ in range(spec.iodepth):
                    a = cp.empty(spec.bs, dtype=cp.uint8)
                    self.slot_arrays.append((a, cufile.BufferRegistration(a).register()))
                ptrs = [a.data.ptr for a, _ in self.slot_arrays]
            if layout != "shared":
                self._slot_buf = f.new("uint64_t[]", ptrs)
                j.slot_buf = self._slot_buf
        if self.api != "sync":
            j.queues = self._queues
        htod, dtoh = gpu.copy_fns()
        j.cu_htod, j.cu_dtoh = f.cast("void *", htod), f.cast("void *", dtoh)
        self.scratch = host_buffer(spec.bs)
        self._scratch_c = f.from_buffer(self.scratch)
        j.scratch = f.cast("char *", self._scratch_c)
        if not spec.is_read and spec.verify:
            cp.cuda.runtime.hostRegister(int(f.cast("uintptr_t", j.scratch)), spec.bs, 0)
            self.pinned = True

    @property
    def handle(self):
        return self.own_fh if self.own_fh is not None else self.point.shared["fh"]

    def io(self, slot, off):
        """The Python loop (no compiler): one I/O at a time through gdsdiag.cufile."""
        from ... import cufile

        fh, bs, read = self.handle, self.spec.bs, self.spec.is_read
        if self.api == "sync":
            return (fh.read if read else fh.write)(self.gbuf, bs, HEADER_SIZE + off)
        if self.api == "stream":
            op = (fh.read_async if read else fh.write_async)(self.gbuf, bs, HEADER_SIZE + off, 0, self.stream)
            self.stream.synchronize()
            return op.result
        b = self.batches[0]
        b.submit([cufile.IoRequest(fh, "read" if read else "write", self.gbuf, bs, HEADER_SIZE + off, 0, cookie=1)])
        (e,) = b.wait(1)
        return e.ret if e.status == "COMPLETE" else -1

    def close(self):
        f = self.point.ffi
        if self.scratch is not None:
            if self.pinned:
                self.cp.cuda.runtime.hostUnregister(int(f.cast("uintptr_t", self.job.scratch)))
                self.pinned = False
            f.release(self._scratch_c)
            self.scratch.close()
            self.scratch = None
        while self.batches:
            self.batches.pop().destroy()
        while self.streams:
            s, r = self.streams.pop()
            s.synchronize()
            r.deregister()
        while self.slot_arrays:
            self.slot_arrays.pop()[1].deregister()
        if self.reg is not None:
            self.reg.deregister()
            self.reg = None
        if self.own_fh is not None:
            self.own_fh.deregister()
            self.own_fh = None
        if self.own_fd >= 0:
            os.close(self.own_fd)
            self.own_fd = -1


ENGINE = CufileEngine()
