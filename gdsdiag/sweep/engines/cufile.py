"""cufile: cuFileRead/cuFileWrite on registered GPU buffers, one I/O at a time per worker. The C
loop calls them through the function pointers of the libcufile gdsdiag.cufile loaded; the handle
is registered once per point on the sweep file's own descriptor (never re-opened by path)."""

from __future__ import annotations

from ..files import host_buffer
from . import gpu
from .base import Worker as _Worker

GPU = True


def open_point(point) -> None:
    cp = gpu.cupy()
    gpu.make_current(cp, point.spec.gpu)
    from ... import cufile

    point.shared["cp"] = cp
    point.shared["fh"] = cufile.FileHandle(fd=point.sf.fd).register()


def close_point(point) -> None:
    fh = point.shared.pop("fh", None)
    if fh is not None:
        fh.deregister()  # the descriptor stays the sweep's (fd= handles do not close it)


class Worker(gpu.GpuPattern, _Worker):
    engine_name = "cufile"

    def __init__(self, point, idx):
        super().__init__(point, idx)
        lib = point.lib
        self.native = lib is not None
        if lib is not None:
            self.job.engine = lib.GD_ENGINE_CUFILE
        self.reg = None

    def prepare(self):
        from ... import cufile

        cp = self.cp = self.point.shared["cp"]
        gpu.make_current(cp, self.spec.gpu)
        spec, f, j = self.spec, self.point.ffi, self.job
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.gbuf = cp.empty(spec.bs, dtype=cp.uint8)
        self.reg = cufile.BufferRegistration(self.gbuf).register()
        j.gpu_buf = self.gbuf.data.ptr
        if self.native:
            fh = self.point.shared["fh"]
            L = fh.L
            fn = L.lib.cuFileRead if spec.is_read else L.lib.cuFileWrite
            j.cufile_handle = f.cast("void *", int(L.ffi.cast("uintptr_t", fh.handle)))
            j.cufile_io = f.cast("void *", int(L.ffi.cast("uintptr_t", fn)))
            self.warm_io = f.cast("void *", int(L.ffi.cast("uintptr_t", L.lib.cuFileRead)))
            htod, dtoh = gpu.copy_fns()
            j.cu_htod, j.cu_dtoh = f.cast("void *", htod), f.cast("void *", dtoh)
            self.scratch = host_buffer(spec.bs)
            self._scratch_c = f.from_buffer(self.scratch)
            j.scratch = f.cast("char *", self._scratch_c)

    def io(self, slot, off):
        from ..files import HEADER_SIZE

        fh = self.point.shared["fh"]
        if self.spec.is_read:
            return fh.read(self.gbuf, self.spec.bs, HEADER_SIZE + off)
        return fh.write(self.gbuf, self.spec.bs, HEADER_SIZE + off)

    def close(self):
        if getattr(self, "scratch", None) is not None:
            self.point.ffi.release(self._scratch_c)
            self.scratch.close()
            self.scratch = None
        if self.reg is not None:
            self.reg.deregister()
            self.reg = None
