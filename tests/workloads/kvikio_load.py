"""kvikio reading a 16 MiB file into GPU memory (python3 kvikio_load.py DIR); KVIKIO_COMPAT_MODE=ON
makes it use its own POSIX path (pread into a host bounce buffer, then a copy), OFF uses cuFile."""

import os
import sys

import cupy as cp
import kvikio

d = sys.argv[1]
MiB = 1 << 20
path = os.path.join(d, "kvikio.dat")
with open(path, "wb") as f:
    f.write(os.urandom(16 * MiB))
buf = cp.empty(16 * MiB, dtype=cp.uint8)
with kvikio.CuFile(path, "r") as f:
    n = f.read(buf)
print("op kvikio-read", n, 0, "compat", os.environ.get("KVIKIO_COMPAT_MODE"), flush=True)
os.unlink(path)
