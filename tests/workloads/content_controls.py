"""Issue 43's negative controls beside real loader shapes, printing their own ground truth.

    python3 content_controls.py LIBCUDA DIR

LIBCUDA: the driver to copy with (the real libcuda.so.1 on the GPU machine, where the copies reach a
GPU; a stand-in whose cuMemcpyHtoD_v2 does nothing on a machine without one: the probes see the same
calls and host memory). DIR: where the data files are written (a real disk).

Each case reads one 4 MiB chunk of a file of random bytes and then makes one host-to-device copy of
4 MiB; what the copy carries is the ground truth:
  staged       the chunk, copied by the CPU into a second buffer first (a pinned staging buffer)
  direct       the read's own buffer
  checksum     other bytes made in memory (the file is only summed): its bytes never reach a GPU
  overwritten  the read's own buffer, after other bytes were written into it
  interleaved  two files read, the copy carries the second one's chunk (the first is only summed)
The cases are 3.5 s apart (longer than the trace's wait for a copy), so each is decided alone.
The last stdout line is the truth, as JSON: {"type": "truth", "cases": [{name, file, offset, to_gpu}]}.
"""

import ctypes
import json
import os
import random
import sys
import time

CHUNK = 4 << 20


def main() -> None:
    libcuda, d = sys.argv[1], sys.argv[2]
    lib = ctypes.CDLL(libcuda)
    lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    dev = ctypes.c_uint64(0)
    real = lib.cuInit(0) == 0
    if real:  # (the GPU machine: a context and device memory to copy into)
        ctx = ctypes.c_void_p()
        lib.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0)
        lib.cuMemAlloc_v2(ctypes.byref(dev), ctypes.c_size_t(CHUNK))
    rng = random.Random(43)
    files = {}
    for name in ("weights.bin", "other.bin"):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(rng.randbytes(8 * CHUNK))
        files[name] = os.open(path, os.O_RDONLY)
    buf = bytearray(CHUNK)
    buf2 = bytearray(CHUNK)
    staging = (ctypes.c_char * CHUNK)()
    addr = ctypes.addressof((ctypes.c_char * CHUNK).from_buffer(buf))
    time.sleep(1.5)  # (the tracer sees the library mapped and sends this process's reads one by one)
    cases = []

    def copy(src: int) -> None:
        rc = lib.cuMemcpyHtoD_v2(dev.value or 0x1000, src, CHUNK)
        if real and rc != 0:
            raise SystemExit(f"cuMemcpyHtoD_v2 failed: {rc}")

    def case(name: str, file: str, chunk: int, to_gpu: bool) -> None:
        cases.append({"name": name, "file": file, "offset": chunk * CHUNK, "to_gpu": to_gpu})

    os.preadv(files["weights.bin"], [buf], 0)
    ctypes.memmove(staging, addr, CHUNK)
    copy(ctypes.addressof(staging))
    case("staged", "weights.bin", 0, True)
    time.sleep(3.5)

    os.preadv(files["weights.bin"], [buf], CHUNK)
    sum(buf)  # (the checksum: these bytes stay on the CPU)
    ctypes.memmove(staging, bytes(rng.randbytes(CHUNK)), CHUNK)
    copy(ctypes.addressof(staging))
    case("checksum", "weights.bin", 1, False)
    time.sleep(3.5)

    os.preadv(files["weights.bin"], [buf], 2 * CHUNK)
    copy(addr)
    case("direct", "weights.bin", 2, True)
    time.sleep(3.5)

    os.preadv(files["weights.bin"], [buf], 3 * CHUNK)
    buf[:] = rng.randbytes(CHUNK)
    copy(addr)
    case("overwritten", "weights.bin", 3, False)
    time.sleep(3.5)

    os.preadv(files["other.bin"], [buf2], 4 * CHUNK)
    sum(buf2)
    os.preadv(files["weights.bin"], [buf], 4 * CHUNK)
    ctypes.memmove(staging, addr, CHUNK)
    copy(ctypes.addressof(staging))
    case("interleaved-copied", "weights.bin", 4, True)
    case("interleaved-summed", "other.bin", 4, False)
    print(json.dumps({"type": "truth", "cases": cases}), flush=True)


if __name__ == "__main__":
    main()
