"""Mounts and block devices: which filesystem a directory lives on, the chain of block devices
under it (partition → dm/md → NVMe namespace → controller → PCI function), and a real O_DIRECT
probe on a file this module creates and always removes."""

from __future__ import annotations

import errno
import mmap
import os
import re
from dataclasses import dataclass, field

from .fsroot import FsRoot
from .pci_sysfs import last_bdf, owner_bdf


@dataclass
class Mount:
    mount_id: int
    parent_id: int
    dev: str  # "major:minor"
    root: str
    mount_point: str
    options: list[str]
    fstype: str
    source: str
    super_options: list[str]

    def option(self, name: str) -> str | None:
        for o in self.options + self.super_options:
            k, sep, v = o.partition("=")
            if k == name:
                return v if sep else ""
        return None


def _unescape(s: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \040 \011 \012 \134
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def parse_mountinfo(text: str) -> list[Mount]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if "-" not in parts or len(parts) < 10:
            continue
        sep = parts.index("-")
        try:
            out.append(
                Mount(
                    int(parts[0]),
                    int(parts[1]),
                    parts[2],
                    _unescape(parts[3]),
                    _unescape(parts[4]),
                    parts[5].split(","),
                    parts[sep + 1],
                    _unescape(parts[sep + 2]),
                    parts[sep + 3].split(",") if len(parts) > sep + 3 else [],
                )
            )
        except (ValueError, IndexError):
            continue
    return out


def read_mounts(fs: FsRoot) -> list[Mount]:
    return parse_mountinfo(fs.read_text("/proc/self/mountinfo") or fs.read_text("/proc/1/mountinfo") or "")


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount that holds ``path`` (already canonical): longest mount point prefix, the last
    one mounted on that point winning (mountinfo lists mounts in mount order)."""
    best = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/"):
                best = m
    return best


@dataclass
class BlockNode:
    name: str
    dev: str
    kind: str  # partition, dm, md, nvme, nvme-multipath, virtio, scsi, loop, zram, other
    pci: str | None = None  # PCI function serving it
    controller: str | None = None  # nvmeN for NVMe namespaces
    detail: str = ""
    below: list[BlockNode] = field(default_factory=list)

    def leaves(self) -> list[BlockNode]:
        return [self] if not self.below else [x for b in self.below for x in b.leaves()]

    def kinds(self) -> set[str]:
        return {self.kind} | {k for b in self.below for k in b.kinds()}

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "dev": self.dev,
            "kind": self.kind,
            "pci": self.pci,
            "controller": self.controller,
            "detail": self.detail,
            "below": [b.to_json() for b in self.below],
        }


def block_chain(fs: FsRoot, dev: str, depth: int = 0) -> BlockNode | None:
    """The block device ``dev`` ("major:minor") and what it sits on, from /sys/dev/block."""
    if depth > 16:
        return None
    try:
        real = fs.resolve(f"/sys/dev/block/{dev}")
    except OSError:
        return None
    if not fs.exists(real):
        return None
    name = real.rstrip("/").rsplit("/", 1)[-1]
    if fs.exists(f"{real}/partition"):
        parent_dir = real.rstrip("/").rsplit("/", 1)[0]
        parent_dev = fs.read_text(f"{parent_dir}/dev")
        node = BlockNode(name, dev, "partition")
        if parent_dev:
            sub = block_chain(fs, parent_dev, depth + 1)
            if sub:
                node.below.append(sub)
        return node
    slaves = fs.listdir(f"{real}/slaves")
    if name.startswith("dm-"):
        kind, detail = "dm", fs.read_text(f"{real}/dm/name") or ""
    elif name.startswith("md"):
        kind, detail = "md", fs.read_text(f"{real}/md/level") or ""
    elif name.startswith("nvme"):
        kind, detail = ("nvme-multipath", "native NVMe multipath head") if "nvme-subsys" in real else ("nvme", "")
    elif name.startswith("vd"):
        kind, detail = "virtio", ""
    elif name.startswith("sd"):
        kind, detail = "scsi", ""
    elif name.startswith("loop"):
        kind, detail = "loop", fs.read_text(f"{real}/loop/backing_file") or ""
    elif name.startswith("zram"):
        kind, detail = "zram", ""
    else:
        kind, detail = "other", ""
    node = BlockNode(name, dev, kind, detail=detail)
    for s in slaves:
        sdev = fs.read_text(f"{real}/slaves/{s}/dev")
        sub = block_chain(fs, sdev, depth + 1) if sdev else None
        if sub:
            node.below.append(sub)
    node.pci = last_bdf(real)
    m = re.search(r"/nvme/(nvme\d+)/", real)
    if m:
        node.controller = m.group(1)
    if kind == "nvme-multipath":
        # the head lives under the subsystem; its paths are the controllers of that subsystem
        subsys = re.search(r"(nvme-subsys\d+)", real)
        if subsys:
            ctrls = [c for c in fs.listdir(f"/sys/class/nvme-subsystem/{subsys.group(1)}") if re.match(r"^nvme\d+$", c)]
            node.controller = ",".join(ctrls) or None
            for c in ctrls:
                node.pci = owner_bdf(fs, f"/sys/class/nvme/{c}/device") or node.pci
    return node


@dataclass
class ODirectProbe:
    ok: bool
    detail: str
    errno_name: str | None = None


def odirect_probe(directory: str) -> ODirectProbe:
    """Create gdsdiag-check-*.tmp in ``directory``, write and read back 4 KiB with O_DIRECT from a
    page-aligned buffer, compare, and remove the file.

    Another user may be able to write ``directory`` (a group data directory, a scratch without the
    sticky bit) and swap the name for a symlink at any moment (issue 42: a re-open by name wrote
    4 KiB into the link's target 2 times in 1,101). So the file is created once, relative to a
    descriptor of the directory, with O_CREAT|O_EXCL|O_NOFOLLOW, and every I/O goes through that
    one descriptor: O_DIRECT is added with fcntl(F_SETFL), never by opening the name again."""
    import secrets  # here, not at the top: hashlib/hmac cost every 'check' ~5 ms, used only with --path

    name = f"gdsdiag-check-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    dfd = fd = -1
    try:
        # The directory the operator named (a link in it is theirs to follow), opened once: the
        # create and the unlink are both relative to this descriptor, never to the path again.
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fd = os.open(name, _PROBE_FLAGS, 0o600, dir_fd=dfd)
        return _probe_fd(fd, directory)
    except OSError as e:
        en = errno.errorcode.get(e.errno or 0, str(e.errno))
        return ODirectProbe(False, f"{directory}: {e.strerror} ({en})", en)
    finally:
        if fd >= 0:
            _unlink_ours(dfd, name, fd)
            os.close(fd)
        if dfd >= 0:
            os.close(dfd)


# O_EXCL: never an existing file (a planted link included: O_EXCL fails on any existing name);
# O_NOFOLLOW says the same for the last component, in case a libc or kernel ever treats it apart.
_PROBE_FLAGS = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_RDWR | os.O_CLOEXEC


def _probe_fd(fd: int, directory: str) -> ODirectProbe:
    """The probe's I/O, all on ``fd``, the descriptor the probe created."""
    import fcntl
    import secrets

    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
    except OSError as e:
        if e.errno == errno.EINVAL:
            return ODirectProbe(False, f"{directory}: the filesystem refuses O_DIRECT (EINVAL)", "EINVAL")
        raise
    buf = mmap.mmap(-1, 4096)  # anonymous mmap: page aligned, as O_DIRECT needs
    pattern = secrets.token_bytes(4096)
    buf.write(pattern)
    n = os.pwritev(fd, [buf], 0)
    if n != 4096:
        return ODirectProbe(False, f"O_DIRECT write returned {n} of 4096 bytes")
    back = mmap.mmap(-1, 4096)
    n = os.preadv(fd, [back], 0)
    if n != 4096 or back[:] != pattern:
        return ODirectProbe(False, f"O_DIRECT read back {n} bytes that differ from what was written")
    return ODirectProbe(True, f"O_DIRECT write+read of 4 KiB verified in {directory}")


def _unlink_ours(dfd: int, name: str, fd: int) -> None:
    """Remove ``name`` from the directory only while it is still the file behind ``fd``: another
    user who can write the directory may have renamed ours and put their own file there, which is
    not ours to delete. (The name can still change between this look and the unlink; what that
    race can remove is a name in a directory the other user writes anyway, never a file's data.)"""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        mine = os.fstat(fd)
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            os.unlink(name, dir_fd=dfd)
    except OSError:
        pass


def udev_fs_usage(fs: FsRoot, dev: str) -> str | None:
    """libcufile reads ID_FS_USAGE from the udev database entry of the backing block device
    (/run/udev/data/b<major>:<minor>); without it cuFileHandleRegister fails with 5027
    (seen on the GPU machine: "udev property not found: ID_FS_USAGE vda")."""
    text = fs.read_text(f"/run/udev/data/b{dev}")
    if text is None:
        return None
    m = re.search(r"^E:ID_FS_USAGE=(.*)$", text, re.M)
    return m.group(1) if m else ""
