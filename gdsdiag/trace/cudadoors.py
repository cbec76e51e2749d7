"""The CUDA driver's copy entry points as programs reach them: besides the exported cuMemcpy*
symbols, libcudart and libraries like kvikio get their driver functions from cuGetProcAddress,
which may hand out addresses inside libcuda that no exported symbol names. Asking the driver
(in this process) for them and turning each address into the library's own virtual address gives
uprobe sites valid for every process mapping the same file."""

from __future__ import annotations

import ctypes
import os

# cuGetProcAddress takes base names; the handler says which side is host memory
COPY_ENTRY_POINTS = (
    ("cuMemcpyHtoD", "memcpy_htod"),
    ("cuMemcpyHtoDAsync", "memcpy_htod"),
    ("cuMemcpyDtoH", "memcpy_dtoh"),
    ("cuMemcpyDtoHAsync", "memcpy_dtoh"),
    ("cuMemcpy", "memcpy_any"),
    ("cuMemcpyAsync", "memcpy_any"),
    ("cuMemcpy2D", "memcpy_2d"),
    ("cuMemcpy2DAsync", "memcpy_2d"),
    ("cuMemcpy2DUnaligned", "memcpy_2d"),
    ("cuMemcpy3D", "memcpy_3d"),
    ("cuMemcpy3DAsync", "memcpy_3d"),
    ("cuMemcpyBatchAsync", "memcpy_batch"),  # kvikio's POSIX path (cudaAPI::cuda_memcpy_async)
)
LEGACY_STREAM, PER_THREAD_STREAM = 1, 2  # CU_GET_PROC_ADDRESS_* flags (cuda.h)


def _load_bias(path: str) -> int | None:
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.realpath(parts[5].strip()) == real and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    return None


def proc_address_sites(libcuda: str) -> tuple[dict[int, str], str | None]:
    """{virtual address in libcuda: handler} for the copy entry points cuGetProcAddress returns,
    and a reason when none could be had (no GPU, an old driver)."""
    try:
        lib = ctypes.CDLL(libcuda)
    except OSError as e:
        return {}, f"cannot load {libcuda}: {e}"
    if lib.cuInit(0) != 0:
        return {}, "cuInit failed (no usable GPU here)"
    ver = ctypes.c_int(0)
    lib.cuDriverGetVersion(ctypes.byref(ver))
    get2 = getattr(lib, "cuGetProcAddress_v2", None)
    get1 = getattr(lib, "cuGetProcAddress", None)
    if get2 is not None:
        get2.argtypes = [
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_void_p,
        ]
    elif get1 is not None:
        get1.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64]
    else:
        return {}, "this libcuda has no cuGetProcAddress"
    bias = _load_bias(libcuda)
    if bias is None:
        return {}, f"{libcuda} is not mapped in this process"
    out: dict[int, str] = {}
    for name, fn in COPY_ENTRY_POINTS:
        for flags in (LEGACY_STREAM, PER_THREAD_STREAM):
            p = ctypes.c_void_p()
            if get2 is not None:
                r = get2(name.encode(), ctypes.byref(p), ver.value, flags, None)
            elif get1 is not None:  # (one of the two exists: checked above)
                r = get1(name.encode(), ctypes.byref(p), ver.value, flags)
            else:
                break
            if r == 0 and p.value:
                out[p.value - bias] = fn
    return out, None
