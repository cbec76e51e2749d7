"""What libcufile's cuFileDriverOpen does to the descriptor table, without a GPU: it walks sysfs and
procfs (PCI devices and their attributes, NUMA nodes, mount points, its own maps) with thousands of
open/read/close calls, many of them relative to a directory descriptor (openat(dirfd, "vendor")),
while the program around it does its own file I/O. The tracer must lose nothing in that flood and
account for every data I/O.

  python3 sysfs_flood.py DIR [ROUNDS]

Writes DIR/flood.dat with 64 pwrite(4 KiB) at offsets 0, 4 KiB, …, interleaved with the walk, then
reads it back with 64 pread(4 KiB) and 16 read(16 KiB), also interleaved; prints one line
"flood OPENS" (the number of non-data opens it made) on stdout.
"""

import os
import sys

KiB = 1024


def walk_once() -> int:
    """One pass of the sysfs/procfs walk: returns the number of opens it made."""
    n = 0
    # the PCI tree through directory descriptors, as libcufile's topology scan reads it
    try:
        devs = os.listdir("/sys/bus/pci/devices")  # openat(AT_FDCWD, "/sys/…", O_DIRECTORY)
        n += 1
    except OSError:
        devs = []
    for dev in devs:
        try:
            dfd = os.open(f"/sys/bus/pci/devices/{dev}", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        n += 1
        for attr in ("vendor", "device", "class", "numa_node", "resource", "uevent", "max_link_speed"):
            try:
                fd = os.open(attr, os.O_RDONLY, dir_fd=dfd)  # relative to the device's directory
            except OSError:
                continue
            n += 1
            try:
                os.read(fd, 4096)
            except OSError:
                pass
            os.close(fd)
        try:
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)  # and up the tree
            n += 1
            os.close(up)
        except OSError:
            pass
        os.close(dfd)
    # procfs and devfs: its own maps and status, the mounts, the null device
    for p in ("/proc/self/maps", "/proc/self/status", "/proc/self/mountinfo", "/proc/meminfo", "/dev/null"):
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        n += 1
        try:
            os.read(fd, 65536)
        except OSError:
            pass
        os.close(fd)
    # NUMA nodes, relative to /sys/devices/system/node
    try:
        nfd = os.open("/sys/devices/system/node", os.O_RDONLY | os.O_DIRECTORY)
        n += 1
        for name in ("online", "possible", "has_cpu"):
            try:
                fd = os.open(name, os.O_RDONLY, dir_fd=nfd)
                n += 1
                os.read(fd, 4096)
                os.close(fd)
            except OSError:
                pass
        os.close(nfd)
    except OSError:
        pass
    return n


def main() -> None:
    d = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    path = os.path.join(d, "flood.dat")
    opens = 0
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    block = bytes(range(256)) * 16
    step = max(rounds // 64, 1)
    done = 0
    for r in range(rounds):
        opens += walk_once()
        if r % step == 0 and done < 64:
            os.pwrite(fd, block, done * 4 * KiB)
            done += 1
    while done < 64:
        os.pwrite(fd, block, done * 4 * KiB)
        done += 1
    os.fsync(fd)
    for i in range(64):
        opens += walk_once() if i % 4 == 0 else 0
        assert len(os.pread(fd, 4 * KiB, i * 4 * KiB)) == 4 * KiB
    os.lseek(fd, 0, os.SEEK_SET)
    for i in range(16):
        opens += walk_once() if i % 2 == 0 else 0
        assert len(os.read(fd, 16 * KiB)) == 16 * KiB
    os.close(fd)
    print(f"flood {opens}", flush=True)


if __name__ == "__main__":
    main()
