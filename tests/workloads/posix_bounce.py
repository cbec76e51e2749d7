"""The application-staging (DRAM bounce) shape without a GPU: O_DIRECT writes and reads of 1 MiB
blocks through a host buffer that is then copied (on a GPU machine the copy would go to the GPU)."""

import mmap
import os
import sys

path = os.path.join(sys.argv[1], "bounce.dat")
fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_DIRECT, 0o600)
buf = mmap.mmap(-1, 1 << 20)
buf.write(os.urandom(1 << 20))
try:
    for i in range(4):
        os.pwritev(fd, [buf], i << 20)
    for i in range(4):
        os.preadv(fd, [buf], i << 20)
        staged = bytes(buf)  # the copy out of the host bounce buffer
finally:
    os.close(fd)
    os.unlink(path)
