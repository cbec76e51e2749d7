"""1 MiB O_DIRECT reads into buffers of known physical layout: a 2 MiB huge page (one segment) and
4 KiB-page buffers whose pages happen to be more or less physically contiguous (segments = runs of
contiguous pages, read from /proc/self/pagemap: root only), each still one request per I/O
(<= max_segments). Prints, per buffer and round, IOPS, the device's requests per I/O and its own
time per request (/sys/block/DEV/stat): what the block device's backend charges per segment.

    sudo python3 benchmarks/history/sweep_segments.py FILE DEV [ROUNDS]     # FILE >= 64 MiB on DEV (e.g. vda)
"""

import ctypes
import mmap
import os
import struct
import sys
import time

from gdsdiag.sweep import files

PATH = sys.argv[1]
DEV = sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 4


def segs(addr, n):
    fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    pf = [struct.unpack("Q", os.pread(fd, 8, ((addr >> 12) + i) * 8))[0] & ((1 << 55) - 1) for i in range(n // 4096)]
    os.close(fd)
    return 1 + sum(1 for a, b in zip(pf, pf[1:]) if b != a + 1)


def st():
    v = open(f"/sys/block/{DEV}/stat").read().split()
    return int(v[0]), int(v[3])


bufs = {}
b = files.IoBuffer(1 << 20, "huge")
bufs["huge"] = b
a = ctypes.addressof(ctypes.c_char.from_buffer(b.mem)) + b.offset
print("huge segs", segs(a, 1 << 20))
cand = []
for _i in range(40):
    m = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    a = ctypes.addressof(ctypes.c_char.from_buffer(m))
    ctypes.memset(a, 0, 1 << 20)
    cand.append((segs(a, 1 << 20), m))
cand.sort(key=lambda x: x[0])
fits = [c for c in cand if c[0] <= 254]
print("4k-page buffers, segments:", [c[0] for c in cand])
if fits:
    bufs[f"pages{fits[0][0]}"] = fits[0][1]
    bufs[f"pages{fits[-1][0]}"] = fits[-1][1]
fd = os.open(PATH, os.O_RDONLY | os.O_DIRECT)
size = os.fstat(fd).st_size
res = {k: [] for k in bufs}
for _r in range(ROUNDS):
    for k, b in bufs.items():
        view = (b.view if hasattr(b, "view") else memoryview(b))[: 1 << 20]
        r0, ms0 = st()
        t = time.perf_counter()
        n = 0
        off = 4096
        while time.perf_counter() - t < 1.0:
            os.preadv(fd, [view], off)
            n += 1
            off = (off + (1 << 20)) % (size - (2 << 20))
        el = time.perf_counter() - t
        r1, ms1 = st()
        res[k].append((round(n / el), round((r1 - r0) / n, 2), round((ms1 - ms0) / max(r1 - r0, 1), 3)))
for k, v in res.items():
    print(k, "IOPS, requests/IO, device ms/request per round:", v)
