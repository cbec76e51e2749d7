"""What the GPU engines share: cupy, the CUDA context made current in a worker's thread, the
driver API copy functions the C loop calls (cuMemcpyHtoD_v2/DtoH_v2, from the libcuda cupy
already loaded), and GPU-side pattern fill/check for the Python loop."""

from __future__ import annotations

from typing import Any

from ...errors import GdsdiagError
from ...extras import install_command
from .. import pattern

_copy: dict = {}


def cupy():
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
        return cp
    except Exception as e:  # cupy's import or CUDA's init fail in many ways: one line, the kind named
        raise GdsdiagError(
            f"this mode needs cupy and a CUDA GPU ({type(e).__name__})",
            f"on a GPU machine {install_command('cu13')} ([cu12] for CUDA 12), or use --mode host",
        ) from None


def make_current(cp, gpu: int) -> None:
    """CUDA's current context is per thread: a fresh thread has none, so kernels would land on
    device 0, the driver API copies fail, and libcufile's stream calls answer ENOMEM."""
    cp.cuda.Device(gpu).use()
    cp.cuda.runtime.free(0)  # a no-op runtime call that makes the primary context current


def copy_fns() -> tuple[int, int]:
    """Addresses of cuMemcpyHtoD_v2 and cuMemcpyDtoH_v2 (synchronous for pinned memory)."""
    if not _copy:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        _copy["htod"] = ctypes.cast(lib.cuMemcpyHtoD_v2, ctypes.c_void_p).value
        _copy["dtoh"] = ctypes.cast(lib.cuMemcpyDtoH_v2, ctypes.c_void_p).value
        _copy["lib"] = lib
    return _copy["htod"], _copy["dtoh"]


def stream_fns() -> tuple[int, int]:
    """Addresses of cuStreamSynchronize and cuStreamQuery (cufile-async's C loop waits on them)."""
    copy_fns()
    if "sync" not in _copy:
        import ctypes

        lib = _copy["lib"]
        _copy["sync"] = ctypes.cast(lib.cuStreamSynchronize, ctypes.c_void_p).value
        _copy["query"] = ctypes.cast(lib.cuStreamQuery, ctypes.c_void_p).value
    return _copy["sync"], _copy["query"]


class GpuPattern:
    """Python-loop fill/check of ``self.gbuf`` by kernels on ``self.stream`` (no host copy)."""

    # (a mixin: the worker it is mixed into sets these)
    stream: Any  # a cupy stream
    gbuf: Any  # a cupy array on the point's GPU
    spec: Any  # base.PointSpec
    sf: Any  # files.SweepFile

    def fill(self, slot, off):
        with self.stream:
            pattern.gpu_fill(self.gbuf[: self.spec.bs], off, self.sf.seed)
        self.stream.synchronize()  # cuFile calls are not ordered on this stream

    def check(self, slot, off):
        with self.stream:
            return pattern.gpu_first_mismatch(self.gbuf[: self.spec.bs], off, self.sf.seed)
