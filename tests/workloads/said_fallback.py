"""A loader that says on stderr why it does not use GDS, then reads a file and copies it to the GPU
itself (the shape of fastsafetensors' nogds fallback), for the trace's "what the program said".

    python3 said_fallback.py LIBCUDA FILE

It writes a progress bar (many short writes to stderr, none about the data path), its fallback
warning through Python's warnings module (as a library prints it), and a result line; then reads FILE
in 1 MiB chunks into one buffer, copying each to the GPU through LIBCUDA's cuMemcpyHtoD_v2. Its last
stdout line is its ground truth: {"type": "truth", "said": the warning's text, "bytes": bytes copied}.
"""

import ctypes
import json
import os
import sys
import warnings

MESSAGE = "GDS device node /dev/nvidia-fs0 not found; falling back to nogds copier"


def main() -> None:
    libcuda, path = sys.argv[1], sys.argv[2]
    lib = ctypes.CDLL(libcuda)
    lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    dev = ctypes.c_uint64(0)
    if lib.cuInit(0) == 0:  # (a real driver: a context and device memory to copy into)
        ctx = ctypes.c_void_p()
        lib.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0)
        lib.cuMemAlloc_v2(ctypes.byref(dev), ctypes.c_size_t(1 << 20))
    for i in range(40):
        sys.stderr.write(f"\rLoading checkpoint shards: {i * 100 // 39:3d}%")
        sys.stderr.flush()
    sys.stderr.write("\n")
    warnings.warn(MESSAGE, UserWarning, stacklevel=1)
    buf = ctypes.create_string_buffer(1 << 20)
    fd = os.open(path, os.O_RDONLY)
    moved = 0
    try:
        while True:
            n = os.readv(fd, [memoryview(buf).cast("B")])
            if n <= 0:
                break
            if lib.cuMemcpyHtoD_v2(dev.value, buf, n) != 0:
                raise SystemExit("cuMemcpyHtoD_v2 failed")
            moved += n
    finally:
        os.close(fd)
    print("loaded 1 file", file=sys.stderr, flush=True)
    print(json.dumps({"type": "truth", "said": MESSAGE, "bytes": moved}), flush=True)


if __name__ == "__main__":
    main()
