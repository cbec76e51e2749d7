"""Load a file into GPU memory the ordinary way (numpy then CuPy), and write one back, for tracing
on a GPU machine: python3 cupy_load.py DIR.

write  cupy-src.dat 8 MiB with numpy tofile (host data, no GPU: HOST)
read   it back with numpy fromfile, then cupy.asarray (host-to-device copy of that buffer: DRAM_BOUNCE)
write  cupy-out.dat 8 MiB: cupy.asnumpy (device-to-host copy) then tofile (DRAM_BOUNCE)
"""

import os
import sys

import cupy as cp
import numpy as np

d = sys.argv[1]
MiB = 1 << 20
cp.zeros(1)  # a CUDA context, as a loader has one
src = os.path.join(d, "cupy-src.dat")
np.random.default_rng(1).integers(0, 255, 8 * MiB, dtype=np.uint8).tofile(src)
print("op write", 8 * MiB, 0, flush=True)
host = np.fromfile(src, dtype=np.uint8)
g = cp.asarray(host)
print("op read", 8 * MiB, 0, "then asarray", flush=True)
back = cp.asnumpy(g + 1)
back.tofile(os.path.join(d, "cupy-out.dat"))
print("op write", 8 * MiB, 0, "after asnumpy", flush=True)
assert int((cp.asarray(np.fromfile(os.path.join(d, "cupy-out.dat"), dtype=np.uint8)) - g - 1).sum()) == 0
os.unlink(src)
os.unlink(os.path.join(d, "cupy-out.dat"))
