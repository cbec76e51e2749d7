"""The I/O engines of a sweep point: host (O_DIRECT into host memory), bounce (O_DIRECT into pinned
host memory + a copy to/from the GPU), cufile (the project's bindings), kvikio (kvikio.CuFile with
its own thread pool). Each worker thread issues whole blocks, times each call with perf_counter_ns,
and verifies what it read against the pattern (pattern.py)."""
from __future__ import annotations

import mmap
import os
import random
import threading
import time
from dataclasses import dataclass, field

from ..errors import GdsdiagError
from . import pattern
from .files import HEADER_SIZE, SweepFile, open_direct


class VerifyError(GdsdiagError):
    pass


@dataclass
class PointSpec:
    mode: str          # host | bounce | cufile | kvikio
    rw: str            # read | write | randread | randwrite
    bs: int
    threads: int
    seconds: float | None = None
    total_bytes: int | None = None
    verify: bool = True
    gpu: int = 0
    pool_threads: int | None = None    # kvikio: its thread pool size (the requested --threads)
    task_size: int | None = None       # kvikio: its task size (the requested --bs)

    @property
    def is_read(self) -> bool:
        return self.rw in ("read", "randread")

    @property
    def is_random(self) -> bool:
        return self.rw.startswith("rand")


@dataclass
class PointResult:
    latencies_ns: list = field(default_factory=list)
    nbytes: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    verified_bytes: int = 0
    error: str | None = None
    written: list = field(default_factory=list)     # (offset, size) ranges written, for read-back


class _Offsets:
    """Offsets a worker visits: its own slice sequentially (wrapping), or random aligned blocks."""

    def __init__(self, spec: PointSpec, size: int, worker: int, seed: int):
        self.bs = spec.bs
        blocks = size // spec.bs
        if spec.is_random:
            self.rng = random.Random(seed * 1000003 + worker)
            self.blocks = blocks
            self.next = self._random
        else:
            per = max(blocks // spec.threads, 1)
            self.start = (worker * per) % blocks
            self.count = per if worker < spec.threads - 1 else blocks - self.start
            self.i = 0
            self.next = self._seq

    def _random(self) -> int:
        return self.rng.randrange(self.blocks) * self.bs

    def _seq(self) -> int:
        off = (self.start + self.i % max(self.count, 1)) * self.bs
        self.i += 1
        return off


class _Budget:
    """Shared stop condition: a deadline, or a number of bytes across all workers."""

    def __init__(self, spec: PointSpec, size: int):
        self.deadline = time.perf_counter() + spec.seconds if spec.seconds else None
        self.remaining = spec.total_bytes if spec.total_bytes else (None if spec.seconds else size)
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def take(self, n: int) -> bool:
        if self.stop.is_set():
            return False
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return False
        if self.remaining is not None:
            with self.lock:
                if self.remaining < n:
                    return False
                self.remaining -= n
        return True


def run_point(spec: PointSpec, sf: SweepFile, progress=None) -> PointResult:
    if sf.size < spec.bs:
        raise GdsdiagError(f"block size {spec.bs} is larger than the file ({sf.size})", "raise --size or lower --bs")
    if spec.bs % 4096:
        raise GdsdiagError(f"block size {spec.bs} is not a multiple of 4 KiB (O_DIRECT alignment)", "use 4k, 64k, 1m…")
    worker = {"host": _HostWorker, "bounce": _BounceWorker, "cufile": _CuFileWorker, "kvikio": _KvikioWorker,
              "cufile-async": _CuFileAsyncWorker, "cufile-batch": _CuFileBatchWorker}[spec.mode]
    return worker.run(spec, sf, progress)


class _Worker:
    def __init__(self, spec, sf, shared, idx):
        self.spec, self.sf, self.shared, self.idx = spec, sf, shared, idx
        self.lat: list = []
        self.bytes = 0
        self.verified = 0
        self.written: list = []
        self.error: str | None = None
        self.mismatch = False          # error is a verification failure (not an I/O or CUDA error)

    @classmethod
    def setup(cls, spec, sf):
        return {}

    @classmethod
    def teardown(cls, shared):
        pass

    @classmethod
    def run(cls, spec: PointSpec, sf: SweepFile, progress=None) -> PointResult:
        import psutil
        shared = cls.setup(spec, sf)
        try:
            budget = _Budget(spec, sf.size)
            workers = [cls(spec, sf, shared, i) for i in range(spec.threads)]
            for w in workers:
                w.prepare()
            proc = psutil.Process()
            cpu0 = sum(proc.cpu_times()[:2])
            t0 = time.perf_counter()
            threads = [threading.Thread(target=w.loop, args=(budget, progress), daemon=True) for w in workers]
            for t in threads:
                t.start()
            try:
                for t in threads:
                    while t.is_alive():
                        t.join(0.2)
            except BaseException:
                budget.stop.set()
                for t in threads:
                    t.join(5)
                raise
            seconds = time.perf_counter() - t0
            cpu = sum(proc.cpu_times()[:2]) - cpu0
            for w in workers:
                w.finish()
        finally:
            cls.teardown(shared)
        res = PointResult(seconds=seconds, cpu_seconds=cpu)
        mismatch = next((w.error for w in workers if w.mismatch), None)
        for w in workers:
            res.latencies_ns += w.lat
            res.nbytes += w.bytes
            res.verified_bytes += w.verified
            res.written += w.written
            res.error = res.error or w.error
        if mismatch:
            # wrong data ends the whole sweep; a failed I/O only fails its point (the runner goes on)
            raise VerifyError(mismatch, "the data read back differs from what was written: check the storage and the path")
        if res.error:
            raise GdsdiagError(f"{spec.mode} {spec.rw} bs={spec.bs}: {res.error}",
                               "for cuFile errors run `gdsdiag check --path DIR`; the cause is named above")
        return res

    def prepare(self):
        pass

    def finish(self):
        pass

    def enter_thread(self) -> None:
        """Runs first in the worker's own thread. CUDA's current context and cupy's current device are
        per thread: a fresh thread has none, so kernels would land on device 0 and libcufile's
        stream-ordered calls fail (cuFileReadAsync answered ENOMEM on the GPU machine)."""
        cp = getattr(self, "cp", None) or self.shared.get("cp")
        if cp is not None:
            cp.cuda.Device(self.spec.gpu).use()
            cp.cuda.runtime.free(0)        # a no-op runtime call that makes the primary context current

    def loop(self, budget: _Budget, progress) -> None:
        offs = _Offsets(self.spec, self.sf.size, self.idx, self.sf.seed)
        bs = self.spec.bs
        try:
            self.enter_thread()
            while budget.take(bs):
                off = offs.next()
                if not self.spec.is_read and self.spec.verify:
                    self.fill(off)
                t = time.perf_counter_ns()
                n = self.io(off)
                self.lat.append(time.perf_counter_ns() - t)
                if n != bs:
                    self.error = f"short {'read' if self.spec.is_read else 'write'} at data offset {off}: {n} of {bs} bytes"
                    budget.stop.set()
                    return
                self.bytes += n
                if self.spec.verify:
                    if self.spec.is_read:
                        bad = self.check(off)
                        if bad is not None:
                            self.error = f"data mismatch at file offset {HEADER_SIZE + bad} (data offset {bad})"
                            self.mismatch = True
                            budget.stop.set()
                            return
                        self.verified += n
                    else:
                        self.written.append((off, n))
                if progress:
                    progress(n)
        except GdsdiagError as e:
            self.error = e.cause
            budget.stop.set()
        except OSError as e:
            self.error = f"{e.strerror or e} during {self.spec.mode} {self.spec.rw}"
            budget.stop.set()
        except Exception as e:     # a cuFile error or a CUDA error: keep its name, stop the point
            self.error = f"{type(e).__name__}: {e}"
            budget.stop.set()


class _HostWorker(_Worker):
    @classmethod
    def setup(cls, spec, sf):
        return {"fd": open_direct(sf.path, os.O_RDWR)}

    @classmethod
    def teardown(cls, shared):
        if "fd" in shared:
            os.close(shared["fd"])

    def prepare(self):
        self.buf = mmap.mmap(-1, self.spec.bs)       # page aligned for O_DIRECT
        self.view = memoryview(self.buf)
        self.verifier = pattern.HostVerifier(self.spec.bs, self.sf.seed)

    def fill(self, off):
        self.verifier.fill(self.view, off)

    def io(self, off):
        fd = self.shared["fd"]
        if self.spec.is_read:
            return os.preadv(fd, [self.view], HEADER_SIZE + off)
        return os.pwritev(fd, [self.view], HEADER_SIZE + off)

    def check(self, off):
        return self.verifier.first_mismatch(self.view, off)

    def finish(self):
        self.view.release()
        self.buf.close()


def _cupy():
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
        return cp
    except Exception as e:
        raise GdsdiagError(f"this mode needs cupy and a CUDA GPU ({type(e).__name__})",
                           "pip install 'gdsdiag[cu13]' (or [cu12]) on a GPU machine, or use --mode host") from None


class _GpuStreamBuffer:
    """The pattern is written into and checked on ``self.gbuf`` by GPU kernels on ``self.stream``, so
    verification costs no device-to-host copy."""

    def fill(self, off):
        with self.stream:
            pattern.gpu_fill(self.gbuf, off, self.sf.seed)
        self.stream.synchronize()      # cuFile calls are not ordered on this stream

    def check(self, off):
        with self.stream:
            return pattern.gpu_first_mismatch(self.gbuf, off, self.sf.seed)


class _BounceWorker(_GpuStreamBuffer, _HostWorker):
    """The application-staging route: O_DIRECT into pinned host memory, then a copy to the GPU
    (reads), or GPU → pinned → O_DIRECT write (writes)."""

    def prepare(self):
        cp = _cupy()
        self.cp = cp
        cp.cuda.Device(self.spec.gpu).use()
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.pinned = cp.cuda.alloc_pinned_memory(self.spec.bs)
        import numpy as np
        self.host = np.frombuffer(self.pinned, dtype=np.uint8, count=self.spec.bs)
        self.view = memoryview(self.host)
        self.gbuf = cp.empty(self.spec.bs, dtype=cp.uint8)

    def io(self, off):
        fd = self.shared["fd"]
        if self.spec.is_read:
            n = os.preadv(fd, [self.view], HEADER_SIZE + off)
            self.gbuf.set(self.host, stream=self.stream)
            self.stream.synchronize()
            return n
        self.gbuf.get(out=self.host, stream=self.stream)
        self.stream.synchronize()
        return os.pwritev(fd, [self.view], HEADER_SIZE + off)

    def finish(self):
        self.view.release()


class _CuFileWorker(_GpuStreamBuffer, _Worker):
    @classmethod
    def setup(cls, spec, sf):
        cp = _cupy()
        cp.cuda.Device(spec.gpu).use()
        from .. import cufile
        fh = cufile.FileHandle(sf.path, "r+").register()
        return {"fh": fh, "cp": cp}

    @classmethod
    def teardown(cls, shared):
        if "fh" in shared:
            shared["fh"].deregister()

    def prepare(self):
        from .. import cufile
        cp = self.shared["cp"]
        self.cp = cp
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.gbuf = cp.empty(self.spec.bs, dtype=cp.uint8)
        self.reg = cufile.BufferRegistration(self.gbuf).register()

    def io(self, off):
        fh = self.shared["fh"]
        if self.spec.is_read:
            return fh.read(self.gbuf, self.spec.bs, HEADER_SIZE + off)
        return fh.write(self.gbuf, self.spec.bs, HEADER_SIZE + off)

    def finish(self):
        self.reg.deregister()


class _CuFileAsyncWorker(_CuFileWorker):
    """Stream-ordered cuFile (cuFileReadAsync/WriteAsync on a registered stream per thread, registered
    GPU buffer as in the cufile mode). The I/O thread must have the CUDA context current (enter_thread):
    without it libcufile 1.15 answered every async call with ENOMEM on the GPU machine."""

    def prepare(self):
        from .. import cufile
        super().prepare()
        self.sreg = cufile.StreamRegistration(self.stream).register()

    def io(self, off):
        fh = self.shared["fh"]
        fn = fh.read_async if self.spec.is_read else fh.write_async
        op = fn(self.gbuf, self.spec.bs, HEADER_SIZE + off, 0, self.stream)
        self.stream.synchronize()
        return op.result

    def finish(self):
        self.sreg.deregister()
        super().finish()


BATCH_DEPTH = 8


class _CuFileBatchWorker(_CuFileWorker):
    """cuFile batch I/O: each operation is one batch of BATCH_DEPTH requests of --bs over a
    contiguous region (cuFileBatchIOSubmit + GetStatus until all complete)."""

    @classmethod
    def run(cls, spec, sf, progress=None):
        inner = PointSpec(spec.mode, spec.rw, spec.bs * BATCH_DEPTH, spec.threads, spec.seconds, spec.total_bytes,
                          spec.verify, spec.gpu, task_size=spec.bs)
        if sf.size < inner.bs:
            raise GdsdiagError(f"{BATCH_DEPTH} × bs = {inner.bs} exceeds the file size {sf.size}", "raise --size")
        return super().run.__func__(cls, inner, sf, progress)

    def prepare(self):
        super().prepare()
        from .. import cufile
        self.batch = cufile.Batch(BATCH_DEPTH).__enter__()

    def io(self, off):
        from .. import cufile
        fh, task = self.shared["fh"], self.spec.task_size
        op = "read" if self.spec.is_read else "write"
        self.batch.submit([cufile.IoRequest(fh, op, self.gbuf, task, HEADER_SIZE + off + i * task, i * task, cookie=i + 1)
                           for i in range(BATCH_DEPTH)])
        events = self.batch.wait(BATCH_DEPTH)
        failed = [e for e in events if e.status != "COMPLETE" or e.ret != task]
        if failed:
            return sum(max(e.ret, 0) for e in events if e.status == "COMPLETE")
        return task * BATCH_DEPTH

    def finish(self):
        self.batch.destroy()
        super().finish()


class _KvikioWorker(_Worker):
    """kvikio.CuFile with its own thread pool: one worker issues requests of threads × bs bytes,
    which kvikio splits into bs-sized tasks over ``threads`` pool threads."""

    @classmethod
    def run(cls, spec, sf, progress=None):
        inner = PointSpec(spec.mode, spec.rw, spec.bs * spec.threads, 1, spec.seconds, spec.total_bytes, spec.verify, spec.gpu,
                          pool_threads=spec.threads, task_size=spec.bs)
        if sf.size < inner.bs:
            raise GdsdiagError(f"threads × bs = {inner.bs} exceeds the file size {sf.size}", "raise --size")
        res = super().run.__func__(cls, inner, sf, progress)
        res.requested = spec
        return res

    @classmethod
    def setup(cls, spec, sf):
        cp = _cupy()
        cp.cuda.Device(spec.gpu).use()
        try:
            import kvikio
            import kvikio.defaults
        except ImportError:
            raise GdsdiagError("--mode kvikio needs kvikio", "pip install kvikio-cu13 (or kvikio-cu12)") from None
        cfg = {"num_threads": spec.pool_threads or 1, "task_size": spec.task_size or spec.bs}
        if hasattr(kvikio.defaults, "set"):
            kvikio.defaults.set(cfg)
        else:   # kvikio < 24.12
            kvikio.defaults.num_threads_reset(cfg["num_threads"])
            kvikio.defaults.task_size_reset(cfg["task_size"])
        f = kvikio.CuFile(sf.path, "r+")
        return {"f": f, "cp": cp, "kvikio": kvikio}

    @classmethod
    def teardown(cls, shared):
        if "f" in shared:
            shared["f"].close()

    def prepare(self):
        cp = self.shared["cp"]
        self.gbuf = cp.empty(self.spec.bs, dtype=cp.uint8)

    def fill(self, off):
        pattern.gpu_fill(self.gbuf, off, self.sf.seed)
        self.shared["cp"].cuda.Device().synchronize()

    def io(self, off):
        f = self.shared["f"]
        if self.spec.is_read:
            return f.pread(self.gbuf, self.spec.bs, HEADER_SIZE + off).get()
        return f.pwrite(self.gbuf, self.spec.bs, HEADER_SIZE + off).get()

    def check(self, off):
        return pattern.gpu_first_mismatch(self.gbuf, off, self.sf.seed)


def verify_written(sf: SweepFile, ranges: list, chunk: int = 8 << 20) -> tuple[int, int | None]:
    """Read back (host, O_DIRECT) every range a write point wrote; (bytes checked, first bad offset)."""
    if not ranges:
        return 0, None
    merged = []
    for off, n in sorted(ranges):
        if merged and off <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], off + n)
        else:
            merged.append([off, off + n])
    fd = open_direct(sf.path, os.O_RDONLY)
    buf = mmap.mmap(-1, chunk)
    checked = 0
    try:
        for start, end in merged:
            pos = start
            while pos < end:
                n = min(chunk, end - pos)
                with memoryview(buf)[:n] as view:
                    got = os.preadv(fd, [view], HEADER_SIZE + pos)
                    bad = pattern.host_first_mismatch(view, pos, sf.seed) if got == n else None
                if got != n:
                    return checked, pos
                if bad is not None:
                    return checked, bad
                checked += n
                pos += n
    finally:
        os.close(fd)
        buf.close()
    return checked, None
