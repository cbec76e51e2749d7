"""One cell of the proof matrix, run as a child process: ``python -m gdsdiag.validate.proof_probe SPEC``.

A child, so that the environment the parent chose (``CUFILE_ENV_PATH_JSON`` pointing at a private
cufile.json, ``CUFILE_LOGFILE_PATH`` inside the probe directory) reaches a libcufile loaded fresh —
libcufile reads both once, at load and driver open — and so that a probe that hangs (a stuck NVMe,
libcufile 1.16+ spinning in cuFileDriverOpen) is killed by the parent's timeout instead of hanging
validate.

The probe, each direction checked on its own against bytes that the other side produced:

- read: the host writes pattern A into a new file (POSIX, fsync'ed), cuFileRead brings it into
  GPU memory that was filled with another byte first, and the GPU copy is compared with A;
- write: pattern B is copied into GPU memory, cuFileWrite puts it in the file, and the host reads
  the file back (POSIX, page cache dropped) and compares it with B.

cuFile's level-3 per-GPU counters are read before and after, so the route each I/O took is
cuFile's own count. The file lives in the directory the parent made for this cell and is removed
here in ``finally``; the parent removes the whole directory again whatever happened to the child.
Prints one JSON line; never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time

from .. import cufile as cf  # importing loads nothing: cf.load() dlopens libcufile
from ..cufile.probe import _would_spin

# Stages in order; a failure names the one it happened in.
STAGES = ("load", "driver_open", "cuda", "file", "handle_register", "buf_register", "read", "write", "verify")


def _lat(samples: list[float]) -> tuple[float | None, float | None]:
    """(p50, p99) in microseconds; nearest-rank, so with 16 samples p99 is the slowest one."""
    if not samples:
        return None, None
    s = sorted(samples)

    def rank(q):
        return s[min(len(s) - 1, max(0, int(round(q * len(s) + 0.5)) - 1))] * 1e6

    return round(rank(0.50), 1), round(rank(0.99), 1)


def _timed(io, what: str, gbuf, size: int, bs: int) -> tuple[float, list[float]]:
    """``size`` bytes in ``bs`` blocks through one cuFile call each (FileHandle.read or .write): the
    whole time and each call's; a short transfer is an error (EIO) naming the offset."""
    lats: list[float] = []
    t0 = time.perf_counter()
    for off in range(0, size, bs):
        t = time.perf_counter()
        n = io(gbuf, bs, file_offset=off, buf_offset=off)
        lats.append(time.perf_counter() - t)
        if n != bs:
            raise OSError(5, f"short {what}: {n} of {bs} bytes at offset {off}")
    return time.perf_counter() - t0, lats


def _io_result(nbytes: int, seconds: float, lats: list[float], expected: bytes, got: bytes) -> dict:
    p50, p99 = _lat(lats)
    match = expected == got
    first = None
    if not match:
        import numpy as np

        n = min(len(expected), len(got))
        diff = np.flatnonzero(np.frombuffer(expected, np.uint8, n) != np.frombuffer(got, np.uint8, n))
        first = int(diff[0]) if diff.size else n  # equal up to the shorter one: the first missing byte
    return {
        "bytes": nbytes,
        "n": len(lats),
        "gbps": round(nbytes / seconds / 1e9, 3) if seconds > 0 else None,
        "p50_us": p50,
        "p99_us": p99,
        "match": match,
        "sha256": hashlib.sha256(got).hexdigest(),
        "sha256_expected": hashlib.sha256(expected).hexdigest(),
        "first_diff": first,
    }


def _find_device(cp, bdf: str) -> int | None:
    """The CUDA ordinal of the GPU at PCI address ``bdf`` (CUDA's own order may differ from the
    driver's minor numbers that name GPU0, GPU1…, so the parent names the GPU by address)."""
    want = bdf.lower()
    if want.count(":") == 1:
        want = "0000:" + want
    for i in range(cp.cuda.runtime.getDeviceCount()):
        got = cp.cuda.runtime.deviceGetPCIBusId(i).lower()  # cudaDeviceGetPCIBusId, e.g. 0000:00:06.0
        # the domain's width differs (nvidia-smi prints 8 hex digits, sysfs 4): compare numbers
        dom, rest = got.split(":", 1)
        if f"{int(dom, 16):04x}:{rest}" == want:
            return i
    return None


def run(spec: dict) -> dict:  # noqa: C901  (one straight sequence of stages, each with its cleanup)
    out: dict = {"ok": False, "stage": None, "error": None, "code": None, "name": None}
    stage = "load"
    drv = fh = reg = None
    fd = host_fd = -1
    path = None
    try:
        L = cf.load(os.environ.get("GDSDIAG_LIBCUFILE"))
        out.update(library=L.path, version=L.version)
        why = _would_spin(L.version)
        if why:
            stage = "driver_open"
            out.update(stage=stage, error=why, name="NOT_CALLED")
            return out
        cf.stats.set_level(3)  # before open: level 3 holds the per-GPU route counters
        stage = "driver_open"
        drv = cf.Driver(L).open()
        props = drv.properties()
        out.update(compat_allowed=props.compat_allowed, nvfs_loaded=props.nvfs_loaded)
        stage = "cuda"
        if not spec.get("gpu_bdf"):
            out.update(stage=stage, error="no GPU to probe on this node", name="NO_GPU")
            return out
        try:
            import cupy as cp
        except ImportError as e:
            out.update(stage=stage, error=f"cupy is not installed ({e})", name="NO_CUPY")
            return out
        dev = _find_device(cp, spec["gpu_bdf"])
        if dev is None:
            out.update(stage=stage, error=f"CUDA sees no GPU at {spec['gpu_bdf']}", name="NO_CUDA_DEVICE")
            return out
        cp.cuda.Device(dev).use()
        cp.cuda.runtime.free(0)  # makes the primary context current in this thread
        try:
            cf.stats.start()
            before = cf.path_mix()
        except cf.CuFileError as e:  # the counters are evidence, not the probe: go on without them
            before, out["stats_error"] = None, str(e)
        size, bs = int(spec["size"]), int(spec["bs"])
        rnd = random.Random(spec.get("seed", 25))
        pat_a, pat_b = rnd.randbytes(size), rnd.randbytes(size)
        stage = "file"
        path = os.path.join(spec["dir"], "probe.bin")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(path, flags | os.O_DIRECT, 0o600)
            out["direct"] = True
        except OSError as e:
            if e.errno != 22:  # EINVAL: this filesystem has no O_DIRECT (tmpfs); cuFile can then only do POSIX
                raise
            fd = os.open(path, flags, 0o600)
            out["direct"] = False
        host_fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        os.pwrite(host_fd, pat_a, 0)
        os.fsync(host_fd)
        os.posix_fadvise(host_fd, 0, size, os.POSIX_FADV_DONTNEED)
        stage = "handle_register"
        fh = cf.FileHandle(fd=fd, library=L).register()
        stage = "buf_register"
        gbuf = cp.full(size, 0x5A, dtype=cp.uint8)  # not pattern A: a read that moves nothing cannot match
        reg = cf.BufferRegistration(gbuf, library=L).register()
        stage = "read"
        secs, lats = _timed(fh.read, "read", gbuf, size, bs)
        out["read"] = _io_result(size, secs, lats, pat_a, cp.asnumpy(gbuf).tobytes())
        stage = "write"
        import numpy as np

        gbuf.set(np.frombuffer(pat_b, dtype=np.uint8))
        cp.cuda.runtime.deviceSynchronize()
        secs, lats = _timed(fh.write, "write", gbuf, size, bs)
        stage = "verify"
        os.fsync(fd)
        os.posix_fadvise(host_fd, 0, size, os.POSIX_FADV_DONTNEED)
        back = os.pread(host_fd, size, 0)
        out["write"] = _io_result(size, secs, lats, pat_b, back)
        out["path_mix"] = cf.path_mix().minus(before).to_json() if before is not None else None
        out["ok"] = True
    except Exception as e:  # report, never traceback: the parent turns this into one line
        out["stage"] = stage
        if isinstance(e, cf.CuFileError):
            out.update(error=str(e), code=e.code, name=e.name, meaning=e.text)
        elif isinstance(e, OSError):
            import errno as _errno

            name = _errno.errorcode.get(e.errno or 0, "OSError")
            out.update(error=f"{name}: {e.strerror or e}", code=e.errno, name=name)
        else:
            out.update(error=f"{type(e).__name__}: {e}")
    finally:
        for undo in (
            (lambda: reg.deregister()) if reg is not None else None,
            (lambda: fh.deregister()) if fh is not None else None,
            (lambda: os.close(fd)) if fd >= 0 else None,
            (lambda: os.close(host_fd)) if host_fd >= 0 else None,
            (lambda: os.unlink(path)) if path and os.path.lexists(path) else None,
            (lambda: drv.close()) if drv is not None else None,
        ):
            if undo is None:
                continue
            try:
                undo()
            except Exception as e:  # keep undoing: a failed deregister must not leave the file behind
                out.setdefault("cleanup_errors", []).append(f"{type(e).__name__}: {e}")
        out["removed"] = not (path and os.path.lexists(path))
    return out


def _main() -> None:
    try:
        spec = json.loads(sys.argv[1])
    except (IndexError, ValueError) as e:
        print(json.dumps({"ok": False, "stage": "spec", "error": f"bad probe spec: {e}"}))
        return
    print(json.dumps(run(spec)))


if __name__ == "__main__":
    _main()
