"""host: O_DIRECT into page-aligned host memory — pread/pwrite (psync), or io_uring with --iodepth."""

from __future__ import annotations

import os
from typing import Any

from .. import pattern
from ..files import IoBuffer
from .base import EngineDefaults, Point, PointSpec
from .base import Worker as _Worker


def psync_or_uring(w: _Worker) -> None:
    """A host/bounce worker's C loop engine: pread/pwrite one at a time, or io_uring at --iodepth > 1."""
    lib = w.point.lib
    w.native = lib is not None
    uring = w.spec.iodepth > 1
    w.engine_name = "io_uring" if uring else "psync"
    if lib is not None:
        w.job.engine = lib.GD_ENGINE_URING if uring else lib.GD_ENGINE_PSYNC


class HostBuffers:
    """iodepth × bs bytes on a huge-page boundary, or in 4 KiB pages (``spec.buffers``:
    files.IoBuffer), shared with the C loop. A mixin of a Worker (which sets the attributes
    declared here)."""

    point: Point
    spec: PointSpec
    job: Any
    iob: IoBuffer | None = None

    def alloc_host(self, pinned: bool = False) -> None:
        spec, f, j = self.spec, self.point.ffi, self.job
        self.iob = IoBuffer(spec.bs * spec.iodepth, spec.buffers)
        j.host_buf = self.iob.cdata(f)
        self.view = self.iob.view[: spec.bs]

    def free_host(self) -> None:
        if self.iob is None:
            return
        self.view.release()
        self.iob.release(self.point.ffi)
        self.iob.close()
        self.iob = None


class Worker(HostBuffers, _Worker):
    def __init__(self, point, idx):
        super().__init__(point, idx)
        psync_or_uring(self)

    def prepare(self):
        self.alloc_host()
        if not self.native:
            self.verifier = pattern.HostVerifier(self.spec.bs, self.sf.seed)

    def io(self, slot, off):
        from ..files import HEADER_SIZE

        if self.spec.is_read:
            return os.preadv(self.sf.fd, [self.view], HEADER_SIZE + off)
        return os.pwritev(self.sf.fd, [self.view], HEADER_SIZE + off)

    def fill(self, slot, off):
        self.verifier.fill(self.view, off)

    def check(self, slot, off):
        return self.verifier.first_mismatch(self.view, off)

    def close(self):
        self.free_host()


class HostEngine(EngineDefaults):
    mode = "host"
    queued = True
    uring = True
    ceiling = True  # the storage's own speed: the other modes' same point is held against it
    route = "HOST"

    def worker(self, point: Point, idx: int) -> Worker:
        return Worker(point, idx)


ENGINE = HostEngine()
