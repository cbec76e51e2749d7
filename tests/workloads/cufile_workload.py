"""A cuFile workload with known shapes, for tracing on a GPU machine (gdsdiag trace -- python3 this DIR).

Through gdsdiag.cufile: write 8 MiB @0, read 8 MiB @0, read 1 MiB+100 B @0x3007 into buffer offset
0x1000 (unaligned), write 32 MiB @64 MiB, read 32 MiB @64 MiB (chunked by libcufile), a batch of 8
reads of 64 KiB, and one stream-ordered read of 4 MiB; then, with kvikio if installed, a 16 MiB read.
Prints one line per operation (op, size, offset) so a trace can be checked against it.
"""

import os
import sys

import cupy as cp

import gdsdiag.cufile as cf

d = sys.argv[1]
path = os.path.join(d, "gdsdiag-trace-workload.dat")
MiB = 1 << 20
src = cp.random.RandomState(7).randint(0, 256, 96 * MiB, dtype=cp.uint8)
dst = cp.zeros(96 * MiB, dtype=cp.uint8)
with cf.Driver():
    with cf.FileHandle(path, "w+") as fh:
        print("op write", 8 * MiB, 0, flush=True)
        fh.write(src, 8 * MiB, 0)
        print("op read", 8 * MiB, 0, flush=True)
        fh.read(dst, 8 * MiB, 0)
        print("op read", MiB + 100, 0x3007, flush=True)
        fh.read(dst, MiB + 100, 0x3007, 0x1000)
        print("op write", 32 * MiB, 64 * MiB, flush=True)
        fh.write(src, 32 * MiB, 64 * MiB)
        print("op read", 32 * MiB, 64 * MiB, flush=True)
        fh.read(dst, 32 * MiB, 64 * MiB)
        with cf.Batch(8) as b:
            b.submit(
                [cf.IoRequest(fh, "read", dst, 64 * 1024, i * 64 * 1024, i * 64 * 1024, cookie=i + 1) for i in range(8)]
            )
            b.wait(8)
        print("op batch-read 8 x", 64 * 1024, 0, flush=True)
        s = cp.cuda.Stream(non_blocking=True)
        with cf.StreamRegistration(s):
            op = fh.read_async(dst, 4 * MiB, 16 * MiB, 0, s)
            s.synchronize()
            print("op async-read", op.result, 16 * MiB, flush=True)
try:
    import kvikio

    with kvikio.CuFile(path, "r") as f:
        n = f.pread(dst, 16 * MiB, 0).get()
    print("op kvikio-read", n, 0, flush=True)
except ImportError:
    print("kvikio not installed", flush=True)
os.unlink(path)
