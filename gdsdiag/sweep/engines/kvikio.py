"""kvikio: kvikio.CuFile with its own thread pool — one worker issues requests of threads × bs
bytes, which kvikio splits into bs-sized tasks over ``threads`` pool threads. kvikio opens files
by name: it is given /proc/<pid>/fd/<fd>, which reopens the sweep's own inode whatever the
directory entry has become. Python loop (kvikio's pool does the I/O in C++)."""

from __future__ import annotations

from ...errors import GdsdiagError
from ...extras import install_command
from ...routes import Route
from .. import pattern
from . import gpu
from .base import Point, PointResult, PointSpec, UsageError
from .base import Worker as _Worker
from .cufile import CufileRoutes


def adapt(spec: PointSpec, size: int) -> PointSpec:
    """One worker whose requests are threads × bs, split by kvikio's pool of --threads threads."""
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
        buffers=spec.buffers,
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
        raise GdsdiagError(
            "--mode kvikio needs kvikio", f"{install_command('cu13')} (CUDA 13; [cu12] for CUDA 12)"
        ) from None
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


class KvikioEngine(CufileRoutes):
    mode = "kvikio"
    # no cuFile I/O counted: kvikio took its own POSIX path (a host buffer and a copy)
    uncounted = Route.DRAM_BOUNCE
    uncounted_note = "kvikio did not go through cuFile (its own POSIX path: cuFile handle registration failed?)"
    uncounted_design = "its own POSIX path: no cuFile I/O counted (KVIKIO_COMPAT_MODE=AUTO falls back silently)"
    processes = False  # one worker whose own thread pool is the parallelism: nothing to fork

    def adapt(self, spec: PointSpec, size: int) -> PointSpec:
        return adapt(spec, size)

    def open_point(self, point: Point) -> None:
        open_point(point)

    def close_point(self, point: Point) -> None:
        close_point(point)

    def worker(self, point: Point, idx: int) -> Worker:
        return Worker(point, idx)

    def summarize(self, summary: dict, spec: PointSpec, res: PointResult) -> None:
        # kvikio's requests are threads × bs (split over its pool): IOPS counted in bs units like
        # the other modes; latencies stay per request
        if res.seconds:
            summary["iops"] = round(res.nbytes / spec.bs / res.seconds, 1)
            summary["request_bytes"] = spec.bs * spec.threads

    def written_unit(self, spec: PointSpec) -> int:
        return spec.bs * spec.threads  # the bitmap counts the adapted requests


ENGINE = KvikioEngine()
