"""bounce: the application-staging route — O_DIRECT into pinned host memory, then a copy to the
GPU (reads), or GPU → pinned → O_DIRECT write (writes); the copy is inside each I/O's latency.
The C loop checks the bytes that reached the GPU (copied back to a scratch buffer, outside the
latency)."""

from __future__ import annotations

import os
from typing import Any

from ...routes import Route
from ..files import host_buffer
from . import gpu
from .base import EngineDefaults, FioJob, Point
from .base import Worker as _Worker
from .host import HostBuffers, psync_or_uring


class Worker(gpu.GpuPattern, HostBuffers, _Worker):
    def __init__(self, point, idx):
        super().__init__(point, idx)
        psync_or_uring(self)
        self.job.bounce = 1
        self.registered = False
        self.scratch: Any = None  # an mmap host buffer for verified writes

    def prepare(self):
        cp = self.cp = self.point.shared["cp"]
        gpu.make_current(cp, self.spec.gpu)
        spec, f, j = self.spec, self.point.ffi, self.job
        self.alloc_host()
        # pin the page-aligned mmap (cudaHostRegister) rather than take cupy's pinned pool, whose
        # sub-allocations need not be 4 KiB aligned as O_DIRECT requires
        cp.cuda.runtime.hostRegister(int(f.cast("uintptr_t", j.host_buf)), spec.bs * spec.iodepth, 0)
        self.registered = True
        self.gbuf = cp.empty(spec.bs * spec.iodepth, dtype=cp.uint8)
        self.stream = cp.cuda.Stream(non_blocking=True)
        j.gpu_buf = self.gbuf.data.ptr
        if self.native:
            htod, dtoh = gpu.copy_fns()
            j.cu_htod, j.cu_dtoh = f.cast("void *", htod), f.cast("void *", dtoh)
            self.scratch = host_buffer(spec.bs)
            self._scratch_c = f.from_buffer(self.scratch)
            j.scratch = f.cast("char *", self._scratch_c)
        else:
            import numpy as np

            self.host = np.frombuffer(self.view, dtype=np.uint8, count=spec.bs)

    def io(self, slot, off):
        from ..files import HEADER_SIZE

        g = self.gbuf[: self.spec.bs]
        if self.spec.is_read:
            n = os.preadv(self.sf.fd, [self.view], HEADER_SIZE + off)
            g.set(self.host, stream=self.stream)
            self.stream.synchronize()
            return n
        g.get(out=self.host, stream=self.stream)
        self.stream.synchronize()
        return os.pwritev(self.sf.fd, [self.view], HEADER_SIZE + off)

    def close(self):
        if getattr(self, "scratch", None) is not None:
            self.point.ffi.release(self._scratch_c)
            self.scratch.close()
            self.scratch = None
        if self.registered:
            self.registered = False
            if getattr(self, "host", None) is not None:
                del self.host
            self.cp.cuda.runtime.hostUnregister(int(self.point.ffi.cast("uintptr_t", self.job.host_buf)))
        self.free_host()


class BounceEngine(EngineDefaults):
    mode = "bounce"
    gpu = True
    queued = True
    uring = True
    route: Route | None = Route.DRAM_BOUNCE
    # libcufile's posix path: pread to host memory, then a copy to the GPU
    fio: FioJob | None = FioJob("posix", buffer_memory="pinned (cudaHostRegister)")
    design = (
        "a bounce by design of --mode bounce: O_DIRECT into pinned host memory, then a copy to the GPU "
        "(writes: GPU → pinned → O_DIRECT)"
    )

    def open_point(self, point: Point) -> None:
        point.shared["cp"] = gpu.cupy()

    def worker(self, point: Point, idx: int) -> Worker:
        return Worker(point, idx)


ENGINE = BounceEngine()
