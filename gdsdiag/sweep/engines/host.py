"""host: O_DIRECT into page-aligned host memory — pread/pwrite (psync), or io_uring with --iodepth."""

from __future__ import annotations

import os
from typing import Any

from ...routes import Route
from .. import pattern
from ..files import IoBuffer
from .base import EngineDefaults, FioJob, Point, PointSpec
from .base import Worker as _Worker


def psync_or_uring(w: _Worker) -> None:
    """A host/bounce worker's C loop engine: pread/pwrite one at a time, or io_uring at --iodepth > 1."""
    lib = w.point.lib
    w.native = lib is not None
    uring = w.spec.iodepth > 1
    w.engine_name = "io_uring" if uring else "psync"
    if lib is not None:
        w.job.engine = lib.GD_ENGINE_URING if uring else lib.GD_ENGINE_PSYNC


# From this block size a psync read's check runs on a helper thread, overlapped with the next read
# (csrc/ioloop.c, run_sync_pipelined): below it a hand-off costs about what the check does. Writes
# generate their pattern in the worker: on the 2-vCPU machine a helper generating block k+1 during
# write k was no better (docs/benchmarks.md, "Sweep against fio"), the pattern loop's AVX2 build was.
OVERLAP_MIN_BS = 64 * 1024


def overlapped_check(spec: PointSpec) -> bool:
    """Whether a host read point checks block k while block k+1 is read (fio's verify_async):
    one I/O at a time (psync), verification on, blocks of OVERLAP_MIN_BS or more.
    GDSDIAG_SWEEP_VERIFY=inline keeps the check in the worker (the A/B of docs/benchmarks.md)."""
    if os.environ.get("GDSDIAG_SWEEP_VERIFY") == "inline":
        return False
    return spec.is_read and spec.verify and spec.iodepth == 1 and spec.bs >= OVERLAP_MIN_BS


class HostBuffers:
    """iodepth × bs bytes on a huge-page boundary, or in 4 KiB pages (``spec.buffers``:
    files.IoBuffer), shared with the C loop. A mixin of a Worker (which sets the attributes
    declared here)."""

    point: Point
    spec: PointSpec
    job: Any
    iob: IoBuffer | None = None

    def alloc_host(self, pinned: bool = False, slots: int | None = None) -> None:
        spec, f, j = self.spec, self.point.ffi, self.job
        self.iob = IoBuffer(spec.bs * (slots or spec.iodepth), spec.buffers)
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
        pipe = self.native and self.point.lib is not None and overlapped_check(self.spec)
        self.alloc_host(slots=2 if pipe else None)  # the pipeline reads into one half while the other is checked
        self.job.pipeline = 1 if pipe else 0
        if pipe:
            self.loop_extra = {"check": "overlapped"}
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
    route: Route | None = Route.HOST
    fio: FioJob | None = FioJob(None)  # psync, io_uring at --iodepth > 1
    design = (
        "--mode host: O_DIRECT file I/O of host memory only, the ceiling the GPU modes are held against; "
        "not on the GPU data path"
    )

    def worker(self, point: Point, idx: int) -> Worker:
        return Worker(point, idx)


ENGINE = HostEngine()
