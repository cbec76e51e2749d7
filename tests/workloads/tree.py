"""A process tree doing file I/O of every kind, with known offsets and sizes, for gdsdiag trace's
live tests (python3 tree.py DIR [URING_PROGRAM]). No GPU: every I/O here is HOST.

parent      write() first.dat 2 x 64 KiB, close; open second.dat (the same fd number again) and
            write() 64 KiB: must be reported as second.dat (the reused-descriptor bug);
            forks child and waits
child       O_DIRECT child.dat: pwritev 4 x 1 MiB, preadv 4 x 1 MiB (offsets i MiB); forks grandchild
grandchild  buffered gc.dat: write() 256 KiB x 2 (0, 256 KiB), lseek 0, read() 128 KiB (@0),
            readv 2 x 64 KiB (@128 KiB), writev 2 x 64 KiB (@256 KiB), dup -> pread 64 KiB @12 KiB
            through the dup; copy_file_range 64 KiB gc.dat@0 -> cfr.dat@0; pwrite 8 KiB @4 KiB to rel.dat
            opened relative to a directory fd; mmap mm.dat (1 MiB, evicted
            from the page cache first) and touch every page; then execs URING_PROGRAM ur.dat
Each process prints "op ..." lines so a trace can be checked against them.
"""

import mmap
import os
import sys

KiB, MiB = 1024, 1 << 20
d = sys.argv[1]
uring = sys.argv[2] if len(sys.argv) > 2 else None


def say(*a):
    print("op", os.getpid(), *a, flush=True)


def parent():
    fd = os.open(os.path.join(d, "first.dat"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.write(fd, b"a" * 64 * KiB)
    os.write(fd, b"a" * 64 * KiB)
    say("write first.dat", fd)
    os.close(fd)
    fd2 = os.open(os.path.join(d, "second.dat"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    assert fd2 == fd, (fd, fd2)
    os.write(fd2, b"b" * 64 * KiB)
    say("write second.dat", fd2)
    os.close(fd2)
    # the mmap file, written and evicted before the grandchild maps it
    with open(os.path.join(d, "mm.dat"), "wb") as f:
        f.write(os.urandom(MiB))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    pid = os.fork()
    if pid == 0:
        child()
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(st))


def child():
    path = os.path.join(d, "child.dat")
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC | os.O_DIRECT, 0o600)
    buf = mmap.mmap(-1, MiB)
    buf.write(os.urandom(MiB))
    for i in range(4):
        os.pwritev(fd, [buf], i * MiB)
    for i in range(4):
        os.preadv(fd, [buf], i * MiB)
    say("direct child.dat")
    os.close(fd)
    pid = os.fork()
    if pid == 0:
        grandchild()
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(st))


def grandchild():
    fd = os.open(os.path.join(d, "gc.dat"), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    os.write(fd, b"g" * 256 * KiB)
    os.write(fd, b"h" * 256 * KiB)
    os.lseek(fd, 0, os.SEEK_SET)
    assert len(os.read(fd, 128 * KiB)) == 128 * KiB
    a, b = bytearray(64 * KiB), bytearray(64 * KiB)
    assert os.readv(fd, [a, b]) == 128 * KiB
    assert os.writev(fd, [a, b]) == 128 * KiB
    fd2 = os.dup(fd)
    assert len(os.pread(fd2, 64 * KiB, 12 * KiB)) == 64 * KiB
    out = os.open(os.path.join(d, "cfr.dat"), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    assert os.copy_file_range(fd, out, 64 * KiB, 0, 0) == 64 * KiB
    os.close(out)
    os.close(fd2)
    os.close(fd)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)  # openat relative to a directory fd
    rel = os.open("rel.dat", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600, dir_fd=dfd)
    os.pwrite(rel, b"r" * 8 * KiB, 4 * KiB)
    os.close(rel)
    os.close(dfd)
    say("buffered gc.dat")
    fd = os.open(os.path.join(d, "mm.dat"), os.O_RDONLY)
    m = mmap.mmap(fd, MiB, prot=mmap.PROT_READ)
    total = sum(m[i] for i in range(0, MiB, 4096))
    m.close()
    os.close(fd)
    say("mmap mm.dat", total)
    if uring:
        os.execv(uring, [uring, os.path.join(d, "ur.dat")])


parent()
