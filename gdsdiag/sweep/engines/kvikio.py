"""kvikio: kvikio.CuFile with its own thread pool — one worker issues requests of threads × bs
bytes, which kvikio splits into bs-sized tasks over ``threads`` pool threads. kvikio opens files
by name: it is given /proc/<pid>/fd/<fd>, which reopens the sweep's own inode whatever the
directory entry has become. Python loop (kvikio's pool does the I/O in C++)."""

from __future__ import annotations

from ...errors import GdsdiagError
from .. import pattern
from . import gpu
from .base import PointSpec, UsageError
from .base import Worker as _Worker

GPU = True


def adapt(spec: PointSpec, size: int) -> PointSpec:
    inner = PointSpec(
        spec.mode,
        spec.rw,
        spec.bs * spec.threads,
        1,
        spec.seconds,
        spec.total_bytes,
        spec.verify,
        spec.gpu,
        pool_threads=spec.threads,
        task_size=spec.bs,
    )
    if size < inner.bs:
        raise UsageError(f"threads × bs = {inner.bs} exceeds the file size {size}", "raise --size")
    return inner


def open_point(point) -> None:
    spec = point.spec
    cp = gpu.cupy()
    gpu.make_current(cp, spec.gpu)
    try:
        import kvikio
        import kvikio.defaults
    except ImportError:
        raise GdsdiagError("--mode kvikio needs kvikio", "pip install kvikio-cu13 (or kvikio-cu12)") from None
    cfg = {"num_threads": spec.pool_threads or 1, "task_size": spec.task_size or spec.bs}
    if hasattr(kvikio.defaults, "set"):
        kvikio.defaults.set(cfg)
    else:  # kvikio < 24.12
        kvikio.defaults.num_threads_reset(cfg["num_threads"])
        kvikio.defaults.task_size_reset(cfg["task_size"])
    point.shared.update(cp=cp, f=kvikio.CuFile(point.sf.proc_path, "r+"))


def close_point(point) -> None:
    f = point.shared.pop("f", None)
    if f is not None:
        f.close()


class Worker(_Worker):
    native = False

    def prepare(self):
        cp = self.point.shared["cp"]
        gpu.make_current(cp, self.spec.gpu)
        self.gbuf = cp.empty(self.spec.bs, dtype=cp.uint8)

    def fill(self, slot, off):
        pattern.gpu_fill(self.gbuf, off, self.sf.seed)
        self.point.shared["cp"].cuda.Device().synchronize()

    def io(self, slot, off):
        from ..files import HEADER_SIZE

        f = self.point.shared["f"]
        if self.spec.is_read:
            return f.pread(self.gbuf, self.spec.bs, HEADER_SIZE + off).get()
        return f.pwrite(self.gbuf, self.spec.bs, HEADER_SIZE + off).get()

    def check(self, slot, off):
        return pattern.gpu_first_mismatch(self.gbuf, off, self.sf.seed)
