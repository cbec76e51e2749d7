"""``gdsdiag snapshot``: capture what the readers read, and open such a capture again.

The archive mirrors the live paths (``sys/...``, ``proc/...``) so that an unpacked snapshot is a
root any reader accepts. sysfs files report a size of 4096 whatever they hold, so each file is
read and stored with its real length; symbolic links are stored as links so the hierarchy
(``/sys/bus/pci/devices/X -> ../../../devices/pci0000:00/...``) survives.
"""
from __future__ import annotations

import glob
import io
import os
import json
import platform
import stat
import tarfile
import tempfile
import time

from .errors import GdsdiagError, refuse_existing

# Per PCI function: the files the readers use.
PCI_FILES = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device", "revision",
             "numa_node", "local_cpulist", "current_link_speed", "current_link_width",
             "max_link_speed", "max_link_width", "config", "driver", "iommu_group", "uevent")
PROC_FILES = ("/proc/cmdline", "/proc/cpuinfo", "/proc/modules", "/proc/mounts", "/proc/self/mountinfo",
              "/proc/version", "/proc/config.gz", "/proc/sys/kernel/osrelease", "/proc/1/cgroup")
BLOCK_FILES = ("dev", "partition", "dm/name", "md/level", "loop/backing_file", "device")
GLOBS = ("/proc/driver/nvidia/version", "/proc/driver/nvidia/params", "/proc/driver/nvidia/gpus/*/information",
         "/proc/driver/nvidia-fs/*", "/sys/module/nvidia_fs/version", "/sys/module/nvidia_fs/parameters/*",
         "/sys/module/nvme_core/parameters/multipath", "/sys/module/nvidia/version",
         "/sys/kernel/iommu_groups/*/type", "/sys/kernel/iommu_groups/*/devices/*",
         "/sys/class/iommu/*", "/sys/devices/system/node/node*/cpulist", "/sys/devices/system/node/possible",
         "/sys/class/nvme/*", "/sys/class/nvme/*/device", "/sys/class/nvme/*/model", "/sys/class/nvme/*/nvme*n*",
         "/sys/class/net/*", "/sys/class/net/*/device", "/sys/class/infiniband/*", "/sys/class/infiniband/*/device",
         "/sys/class/infiniband/*/ports/*/link_layer", "/sys/class/infiniband/*/ports/*/state",
         "/sys/block/*", "/sys/block/*/device", "/sys/block/*/slaves/*", "/sys/block/*/holders/*",
         "/sys/class/nvme-subsystem/*", "/sys/class/nvme-subsystem/*/nvme*",
         "/sys/kernel/mm/memory_peers/nv_mem/version",
         "/etc/cufile.json", "/usr/local/cuda/gds/cufile.json", "/dev/nvidia*", "/run/udev/control",
         "/run/udev/data/b*", "/.dockerenv", "/run/.containerenv")


class _Writer:
    def __init__(self, tar: tarfile.TarFile, root: str):
        self.tar, self.root, self.done = tar, root, set()
        self.skipped: list[str] = []

    def host(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def add(self, path: str) -> None:
        """Add ``path`` (absolute, inside root); links are kept and their targets added too."""
        path = os.path.normpath(path)
        if path in self.done:
            return
        self.done.add(path)
        host = self.host(path)
        parent = os.path.dirname(path)
        if parent != path and parent not in self.done:
            self._add_dir_chain(parent)
        # Keep the links that encode the hierarchy (sysfs); elsewhere (/etc/cufile.json -> /opt/...)
        # store what the link points to, since its target is not in the archive.
        if os.path.islink(host) and path.startswith("/sys/"):
            target = os.readlink(host)
            ti = tarfile.TarInfo(path.lstrip("/"))
            ti.type, ti.linkname, ti.mtime = tarfile.SYMTYPE, target, int(time.time())
            self.tar.addfile(ti)
            resolved = target if target.startswith("/") else os.path.normpath(os.path.join(parent, target))
            # Follow links to devices (the hierarchy) but not into whole driver/module trees.
            if resolved.startswith(("/sys/devices/", "/sys/kernel/iommu_groups/")) and not \
                    os.path.basename(path) in ("driver", "subsystem"):
                self._add_dir_chain(resolved)
            return
        if os.path.isdir(host):
            self._add_dir_chain(path)
            return
        if path.startswith("/dev/") or not stat.S_ISREG(os.stat(host).st_mode):
            # Device nodes and sockets: record that they exist, never read them.
            self._add_bytes(path, b"")
            return
        try:
            # small reads: procfs sysctl files answer a 4 MiB read() with ENOMEM
            with open(host, "rb") as f:
                chunks = []
                while sum(map(len, chunks)) < (1 << 22):
                    c = f.read(65536)
                    if not c:
                        break
                    chunks.append(c)
                data = b"".join(chunks)
        except OSError as e:
            self.skipped.append(f"{path}: {e.strerror}")
            return
        self._add_bytes(path, data)

    def _add_bytes(self, path: str, data: bytes) -> None:
        ti = tarfile.TarInfo(path.lstrip("/"))
        ti.size, ti.mtime, ti.mode = len(data), int(time.time()), 0o644
        self.tar.addfile(ti, io.BytesIO(data))

    def _add_dir_chain(self, path: str) -> None:
        parts = [p for p in path.strip("/").split("/") if p]
        cur = ""
        for p in parts:
            cur += "/" + p
            if cur in self.done:
                continue
            host = self.host(cur)
            # /proc/self is a link to the capturing process: store it as a plain directory.
            if os.path.islink(host) and cur != "/proc/self":
                self.add(cur)
                continue
            self.done.add(cur)
            ti = tarfile.TarInfo(cur.lstrip("/"))
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            self.tar.addfile(ti)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _add_kallsyms(w: "_Writer") -> None:
    """Only the symbols the checks look for: the whole table is megabytes and, read without
    root, all zero addresses anyway."""
    from .platform.kernel import INTERESTING_SYMBOLS
    try:
        with open(w.host("/proc/kallsyms"), "rb") as f:
            keep = [ln for ln in f if len(ln.split()) >= 3 and ln.split()[2].decode(errors="replace") in INTERESTING_SYMBOLS]
    except OSError as e:
        w.skipped.append(f"/proc/kallsyms: {e.strerror}")
        return
    # a marker line so the reader knows the table was readable even when nothing matched
    keep.insert(0, b"0000000000000000 A gdsdiag_filtered_kallsyms\n")
    w._add_bytes("/proc/kallsyms", b"".join(keep))


def create(output: str, root: str = "/") -> dict:
    """Write a snapshot; returns counts. Refuses to overwrite an existing file."""
    refuse_existing(output, "-o")
    outdir = os.path.dirname(os.path.abspath(output))
    if not os.access(outdir, os.W_OK):
        raise GdsdiagError(f"cannot write to {outdir}", "choose a writable -o path")
    tmp = output + ".partial"
    with tarfile.open(tmp, "w:gz") as tar:
        w = _Writer(tar, root)
        for dev in sorted(os.listdir(w.host("/sys/bus/pci/devices")) if os.path.isdir(w.host("/sys/bus/pci/devices")) else []):
            link = f"/sys/bus/pci/devices/{dev}"
            w.add(link)
            real = os.path.realpath(w.host(link))
            rel = "/" + os.path.relpath(real, w.root)
            for f in PCI_FILES:
                if os.path.lexists(os.path.join(real, f)):
                    w.add(f"{rel}/{f}")
        for f in PROC_FILES:
            if os.path.lexists(w.host(f)):
                w.add(f)
        for pattern in GLOBS:
            for hit in sorted(glob.glob(w.host(pattern))):
                w.add("/" + os.path.relpath(hit, w.root))
        for name in sorted(os.listdir(w.host("/sys/class/block")) if os.path.isdir(w.host("/sys/class/block")) else []):
            link = f"/sys/class/block/{name}"
            w.add(link)
            real = "/" + os.path.relpath(os.path.realpath(w.host(link)), w.root)
            w.add(f"/sys/dev/block/{_read(w.host(real + '/dev'))}")
            for f in BLOCK_FILES:
                if os.path.lexists(w.host(f"{real}/{f}")):
                    w.add(f"{real}/{f}")
            for sl in sorted(os.listdir(w.host(real + "/slaves"))) if os.path.isdir(w.host(real + "/slaves")) else []:
                w.add(f"{real}/slaves/{sl}")
        _add_kallsyms(w)
        if os.path.realpath(w.root) == "/":
            from .platform.libcufile import locate
            info = json.dumps(locate().to_json(), indent=1).encode()
            w._add_bytes("/gdsdiag/libcufile.json", info)
        release = platform.release()
        for f in (f"/boot/config-{release}",):
            if os.path.exists(w.host(f)):
                w.add(f)
        meta = f"gdsdiag-snapshot 1\nrelease {release}\ncreated {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        ti = tarfile.TarInfo("gdsdiag-snapshot.txt")
        ti.size = len(meta)
        tar.addfile(ti, io.BytesIO(meta.encode()))
    os.rename(tmp, output)
    return {"entries": len(w.done), "skipped": w.skipped}


MARKER = "/gdsdiag-snapshot.txt"


def open_snapshot(path: str, limits=None):
    """The snapshot as an ``ArchiveRoot``: read in memory, never extracted (docs/security.md).

    An archive without the marker file every gdsdiag snapshot holds is refused: an answer of
    "no findings" for a tarball of something else would be wrong."""
    from .platform.archroot import DEFAULT_LIMITS, ArchiveRoot
    if os.path.isdir(path):
        raise GdsdiagError(f"{path} is a directory", "pass it with --root, or give a .tar.gz from gdsdiag snapshot")
    fs = ArchiveRoot(path, limits or DEFAULT_LIMITS)
    marker = fs.files.get(MARKER, b"")
    if not marker.startswith(b"gdsdiag-snapshot "):
        raise GdsdiagError(f"{path} is not a gdsdiag snapshot (no {MARKER.lstrip('/')} in it)",
                           "create one on the node with 'gdsdiag snapshot -o FILE'")
    return fs
