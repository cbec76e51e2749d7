"""``gdsdiag snapshot``: capture what the readers read (``platform/roots.open_snapshot`` opens such a
capture again).

The archive mirrors the live paths (``sys/...``, ``proc/...``) so that an unpacked snapshot is a
root any reader accepts. sysfs files report a size of 4096 whatever they hold, so each file is
read and stored with its real length; symbolic links are stored as links so the hierarchy
(``/sys/bus/pci/devices/X -> ../../../devices/pci0000:00/...``) survives.
"""

from __future__ import annotations

import glob
import io
import json
import os
import platform
import stat
import tarfile
import time
from typing import TYPE_CHECKING

from .errors import GdsdiagError, refuse_existing
from .platform.roots import MARKER

if TYPE_CHECKING:
    from .schema.snapshot import Captured

# Per PCI function: the files the readers use.
PCI_FILES = (
    "class",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "revision",
    "numa_node",
    "local_cpulist",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
    "config",
    "driver",
    "iommu_group",
    "uevent",
)
PROC_FILES = (
    "/proc/cmdline",
    "/proc/cpuinfo",
    "/proc/modules",
    "/proc/mounts",
    "/proc/self/mountinfo",
    "/proc/version",
    "/proc/config.gz",
    "/proc/sys/kernel/osrelease",
    "/proc/1/cgroup",
)
BLOCK_FILES = ("dev", "partition", "dm/name", "md/level", "loop/backing_file", "device")
GLOBS = (
    "/proc/driver/nvidia/version",
    "/proc/driver/nvidia/params",
    "/proc/driver/nvidia/gpus/*/information",
    "/proc/driver/nvidia-fs/*",
    "/sys/module/nvidia_fs/version",
    "/sys/module/nvidia_fs/parameters/*",
    "/sys/module/nvme_core/parameters/multipath",
    "/sys/module/nvidia/version",
    "/sys/kernel/iommu_groups/*/type",
    "/sys/kernel/iommu_groups/*/devices/*",
    "/sys/class/iommu/*",
    "/sys/devices/system/node/node*/cpulist",
    "/sys/devices/system/node/possible",
    "/sys/class/nvme/*",
    "/sys/class/nvme/*/device",
    "/sys/class/nvme/*/model",
    "/sys/class/nvme/*/nvme*n*",
    "/sys/class/net/*",
    "/sys/class/net/*/device",
    "/sys/class/infiniband/*",
    "/sys/class/infiniband/*/device",
    "/sys/class/infiniband/*/ports/*/link_layer",
    "/sys/class/infiniband/*/ports/*/state",
    "/sys/block/*",
    "/sys/block/*/device",
    "/sys/block/*/slaves/*",
    "/sys/block/*/holders/*",
    "/sys/class/nvme-subsystem/*",
    "/sys/class/nvme-subsystem/*/nvme*",
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/etc/cufile.json",
    "/etc/cuobj.json",
    "/etc/os-release",
    "/usr/lib/os-release",
    "/var/run/nvidia-persistenced/*",
    "/run/nvidia-persistenced/*",
    "/usr/local/cuda/gds/cufile.json",
    "/dev/nvidia*",
    "/run/udev/control",
    "/run/udev/data/b*",
    "/.dockerenv",
    "/run/.containerenv",
)


class _Writer:
    def __init__(self, tar: tarfile.TarFile, root: str, redactor=None):
        self.tar, self.root = tar, root
        self.done: set[str] = set()
        self.skipped: list[str] = []
        self.redactor = redactor
        self.manifest: list[tuple[str, int]] = []
        self.generated: list[dict] = []

    def host(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def add(self, path: str) -> None:
        """Add ``path`` (absolute, inside root); links are kept and their targets added too."""
        path = os.path.normpath(path)
        if path.startswith("/sys/"):
            path = self._canonical_parent(path)
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
            if resolved.startswith(("/sys/devices/", "/sys/kernel/iommu_groups/")) and os.path.basename(path) not in (
                "driver",
                "subsystem",
            ):
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
            # small reads: procfs sysctl files answer a 4 MiB read() with ENOMEM; O_NONBLOCK and
            # the fstat below: a FIFO under --root neither hangs nor gets read
            with os.fdopen(os.open(host, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    self._add_bytes(path, b"")
                    return
                chunks: list[bytes] = []
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

    def _canonical_parent(self, path: str) -> str:
        """``path`` with its directory's links resolved: nothing is stored below a link, which
        'tar x' refuses ("Cannot open: Not a directory") and which is how archives escape."""
        parent = os.path.dirname(path)
        real = os.path.realpath(self.host(parent))
        rootreal = os.path.realpath(self.root)
        if real == rootreal or real.startswith(rootreal.rstrip("/") + "/"):
            rel = "/" + os.path.relpath(real, rootreal)
            return os.path.normpath(os.path.join(rel, os.path.basename(path)))
        return path

    def add_generated(self, path: str, data: bytes | None, source: str, error: str | None = None) -> None:
        """A bundle entry gdsdiag made (command output, results): recorded in the manifest."""
        if data is not None:
            self._add_bytes(path, data)
        self.generated.append(
            {"path": path.lstrip("/"), "source": source, "error": error, "bytes": None if data is None else len(data)}
        )

    def _add_bytes(self, path: str, data: bytes) -> None:
        if self.redactor is not None:
            data = self.redactor.bytes_(path, data)
        self.manifest.append((path.lstrip("/"), len(data)))
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


def _add_kallsyms(w: _Writer) -> None:
    """Only the symbols the checks look for: the whole table is megabytes and, read without
    root, all zero addresses anyway."""
    from .platform.kernel import INTERESTING_SYMBOLS

    try:
        with open(w.host("/proc/kallsyms"), "rb") as f:
            keep = [
                ln for ln in f if len(ln.split()) >= 3 and ln.split()[2].decode(errors="replace") in INTERESTING_SYMBOLS
            ]
    except OSError as e:
        w.skipped.append(f"/proc/kallsyms: {e.strerror}")
        return
    # a marker line so the reader knows the table was readable even when nothing matched
    keep.insert(0, b"0000000000000000 A gdsdiag_filtered_kallsyms\n")
    w._add_bytes("/proc/kallsyms", b"".join(keep))


def _temp_beside(output: str) -> tuple[int, str]:
    """A new file next to ``output``: O_CREAT|O_EXCL|O_NOFOLLOW, so neither an existing file nor a
    planted symlink (``X.partial -> important.txt``) is ever written through. Mode 0600: a snapshot
    holds config space, kallsyms lines and dmesg. Held under an flock for the run's life, so that
    the next run knows a killed run's leftover (remove_leftovers)."""
    import secrets

    d, base = os.path.split(os.path.abspath(output))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(20):
        tmp = os.path.join(d, f".{base}.{secrets.token_hex(6)}.partial")
        try:
            fd = os.open(tmp, flags, 0o600)
            from .outfile import hold

            hold(fd)
            return fd, tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise GdsdiagError(f"cannot write to {d}: {e.strerror}", "choose a writable -o path") from None
    raise GdsdiagError(f"cannot create a temporary file in {d}", "choose another -o directory")


def _partial_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(".partial") and len(name) < 300


def _gzip_or_empty(fd: int) -> bool:
    head = os.pread(fd, 2, 0)
    return head in (b"", b"\x1f\x8b")  # a killed run leaves an empty or a partial gzip stream


def remove_leftovers(outdir: str) -> list[str]:
    """Hidden ``.NAME.XXXX.partial`` files that killed snapshot runs (SIGKILL, power loss) left in
    ``outdir``: ours, gzip (or empty), and no live run holds their lock."""
    from .outfile import remove_stale

    return remove_stale(outdir, _partial_name, _gzip_or_empty)


def _publish(tmp: str, output: str) -> None:
    """Put the finished archive at ``output`` without ever replacing a file there: link() fails
    when the name exists (rename() would overwrite whatever appeared since the first check)."""
    try:
        os.link(tmp, output)
    except FileExistsError:
        raise GdsdiagError(f"{output} exists", "choose another -o path; gdsdiag never overwrites files") from None
    except OSError:
        # filesystems without hard links (vfat, some FUSE): check, then rename
        refuse_existing(output, "-o")
        os.rename(tmp, output)
        return
    os.unlink(tmp)


def create(output: str, root: str = "/", redact: bool = False, bundle: bool = True) -> Captured:
    """Write a snapshot (support bundle); returns counts. Refuses to overwrite an existing file;
    the temporary file is removed whatever ends the run (error, Ctrl-C, SIGTERM)."""
    refuse_existing(output, "-o")
    outdir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(outdir):
        raise GdsdiagError(f"{outdir} is not a directory", "choose a -o path in an existing directory")
    remove_leftovers(outdir)
    fd, tmp = _temp_beside(output)
    try:
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                w = _capture(tar, root, redact, bundle)
            raw.flush()
            os.fsync(raw.fileno())
        _publish(tmp, output)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):  # a full disk, a quota, a read-only remount: one line, nothing left
            import errno

            full = e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
            why = "no space left on the filesystem (ENOSPC)" if full else (e.strerror or str(e) or type(e).__name__)
            raise GdsdiagError(
                f"cannot write {output}: {why}", "free space or choose another -o path (nothing was left behind)"
            ) from None
        raise
    return {
        "entries": len(w.done),
        "skipped": w.skipped,
        "redacted": w.redactor.count if w.redactor else None,
        "bundle": [g["path"] for g in w.generated if g["error"] is None],
    }


def _capture(tar: tarfile.TarFile, root: str, redact: bool, bundle: bool) -> _Writer:
    from .bundle import Redactor

    live = os.path.realpath(root) == "/"
    w = _Writer(tar, root, Redactor(live) if redact else None)
    for dev in sorted(
        os.listdir(w.host("/sys/bus/pci/devices")) if os.path.isdir(w.host("/sys/bus/pci/devices")) else []
    ):
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
    if live:
        from .platform.libcufile import locate

        info = json.dumps(locate().to_json(), indent=1).encode()
        w._add_bytes("/gdsdiag/libcufile.json", info)
    elif os.path.isfile(w.host("/gdsdiag/libcufile.json")) and not os.path.islink(w.host("/gdsdiag/libcufile.json")):
        w.add("/gdsdiag/libcufile.json")  # a tree captured elsewhere keeps its libcufile record
    release = platform.release()
    for f in (f"/boot/config-{release}",):
        if os.path.exists(w.host(f)):
            w.add(f)
    if bundle:
        _add_bundle(w, root, live)
    meta = f"gdsdiag-snapshot 1\nrelease {release}\ncreated {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
    w._add_bytes(MARKER, meta.encode())
    _add_manifest(w, redact)
    return w


def _add_bundle(w: _Writer, root: str, live: bool) -> None:
    """What a support engineer asks for next (issue 12): results, versions, command output, logs."""
    from . import bundle
    from .platform.fsroot import FsRoot

    fs = FsRoot(root)
    for name, (data, err) in bundle.results(fs).items():
        w.add_generated(f"/gdsdiag/{name}", data, f"gdsdiag {name.split('.')[0]} --json", err)
    w.add_generated("/gdsdiag/versions.json", json.dumps(bundle.versions(fs), indent=1).encode(), "gdsdiag")
    if not live:
        return  # commands and logs describe this machine, not the tree under --root
    env = dict(os.environ)
    for argv, name in (
        (["nvidia-smi", "-q"], "nvidia-smi-q.txt"),
        (["nvidia-smi", "topo", "-m"], "nvidia-smi-topo-m.txt"),
        (["nvidia-smi", "nvlink", "-s"], "nvidia-smi-nvlink-s.txt"),
    ):  # NVLink for topology --from
        out, err = bundle.run_command(argv)
        w.add_generated(f"/gdsdiag/{name}", out, " ".join(argv), err)
    out, err = bundle.run_command(["dmesg"])
    if out is not None:
        out = b"".join(ln for ln in out.splitlines(keepends=True) if bundle.DMESG_RE.search(ln))
    w.add_generated("/gdsdiag/dmesg.txt", out, "dmesg | grep -iE 'nvidia|nvme|nvfs|NVRM|nv_peer|p2p'", err)
    cj = env.get("CUFILE_ENV_PATH_JSON")
    if cj:
        data, why = bundle.env_file("CUFILE_ENV_PATH_JSON", cj, 1 << 20, whole=True)
        w.add_generated("/gdsdiag/cufile-env.json", data, f"CUFILE_ENV_PATH_JSON={cj}", why)
    from .cufile._lib import default_log_path

    named = env.get("CUFILE_LOGFILE_PATH")
    for i, path in enumerate(bundle.cufile_logs(fs, env)):
        if path == named and path != default_log_path():  # (gdsdiag's own log: set by gdsdiag)
            data = bundle.env_file("CUFILE_LOGFILE_PATH", path, bundle.LOG_TAIL, whole=False)[0]
        else:
            data = bundle.tail(path)
        if data is not None:
            w.add_generated(f"/gdsdiag/logs/cufile-{i}.log.tail", data, f"last {bundle.LOG_TAIL >> 10} KiB of {path}")


def _add_manifest(w: _Writer, redact: bool) -> None:
    from . import __version__

    doc = {
        "schema": "gdsdiag.snapshot-manifest/1",
        "gdsdiag": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "redacted": redact,
        "generated": w.generated,
        "skipped": w.skipped,
        "entries": [{"path": p, "bytes": n} for p, n in w.manifest],
    }
    data = json.dumps(doc, indent=1).encode()
    r, w.redactor = w.redactor, None  # the manifest lists names and sizes only
    w._add_bytes("/gdsdiag/manifest.json", data)
    w.redactor = r
