"""A filesystem root that every platform reader goes through.

Readers never touch ``/`` directly: they ask an ``FsRoot`` so that a live node, an unpacked
``gdsdiag snapshot`` and hwloc's test trees are read by exactly the same code. Symbolic links
are resolved *inside* the root (an absolute target such as ``/sys/devices/...`` in a snapshot is
re-rooted), and every read failure comes back as ``None`` plus a remembered reason.
"""

from __future__ import annotations

import errno
import os


class FsRoot:
    def __init__(self, root: str = "/"):
        self.root = os.path.abspath(root)
        self.problems: list[str] = []  # unreadable files, with reasons (permissions, malformed)

    def __repr__(self) -> str:
        return f"FsRoot({self.root!r})"

    @property
    def is_live(self) -> bool:
        return self.root == "/"

    def host(self, path: str) -> str:
        """The host path for an absolute path inside the root."""
        return os.path.join(self.root, path.lstrip("/"))

    def resolve(self, path: str) -> str:
        """Canonical absolute path (inside the root) of ``path``, links followed."""
        parts = [p for p in path.split("/") if p]
        out: list[str] = []
        hops = 0
        while parts:
            p = parts.pop(0)
            if p == ".":
                continue
            if p == "..":
                if out:
                    out.pop()
                continue
            candidate = "/" + "/".join(out + [p])
            host = self.host(candidate)
            if os.path.islink(host):
                hops += 1
                if hops > 40:
                    raise OSError(errno.ELOOP, "too many levels of symbolic links", candidate)
                target = os.readlink(host)
                if target.startswith("/"):
                    out = []
                parts = [t for t in target.split("/") if t] + parts
            else:
                out.append(p)
        return "/" + "/".join(out)

    def follow_link(self, path: str) -> str:
        """Resolve a link whose target path holds no further links (sysfs class/bus links): one
        readlink instead of a walk; falls back to ``resolve`` when the target is not a plain dir."""
        try:
            target = os.readlink(self.host(path))
        except OSError:
            return self.resolve(path)
        if target.startswith("/"):
            out = os.path.normpath(target)
        else:
            out = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if os.path.isdir(self.host(out)) and not os.path.islink(self.host(out)):
            return out
        return self.resolve(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(self.host(path))

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.host(path)))
        except OSError:
            return []

    def read_text(self, path: str, note: bool = False) -> str | None:
        data = self.read_bytes(path, note=note)
        if data is None:
            return None
        return data.decode("utf-8", "replace").strip()

    # Kernel files (sysfs, procfs) report a size of 0 or 4096 whatever they hold and are bounded
    # by the kernel; a file under --root that states a larger size than this is refused.
    MAX_FILE = 16 << 20

    def read_bytes(self, path: str, note: bool = False, limit: int | None = None) -> bytes | None:
        data, why = self.read_checked(path, self.MAX_FILE, limit)
        if data is None and note:
            self.problems.append(f"{path}: {why}")
        return data

    def read_checked(
        self, path: str, max_bytes: int | None, limit: int | None = None
    ) -> tuple[bytes | None, str | None]:
        """(data, None) or (None, why): refuses FIFOs, devices (``/dev/zero``) and regular files
        over ``max_bytes``; O_NONBLOCK so that opening a FIFO cannot hang."""
        from ..bounded import check_regular

        try:
            fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            return None, e.strerror or str(e)
        # read() with no size: sysfs attributes are small, and read(n) would allocate n bytes
        # up front for each of the thousands of files a large node has.
        try:
            with open(fd, "rb") as f:
                why = check_regular(os.fstat(fd), max_bytes)
                if why:
                    return None, why
                return (f.read() if limit is None else f.read(limit)), None
        except OSError as e:
            return None, e.strerror or str(e)

    def _open(self, path: str, flags: int) -> int:
        """A descriptor for ``path``. Under a --root tree every link is resolved inside the tree
        (docs/security.md): a link to /etc/shadow reads the tree's /etc/shadow, or nothing."""
        if self.is_live:
            return os.open(self.host(path), flags)
        from .inroot import Unsupported, open_in_root

        if getattr(self, "_rootfd", None) is None:
            self._rootfd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return open_in_root(self._rootfd, path, flags)
        except Unsupported:
            return os.open(self.host(self.resolve(path)), flags | os.O_NOFOLLOW)

    def __del__(self):
        fd = self.__dict__.get("_rootfd")
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def readlink_name(self, path: str) -> str | None:
        """Last component of a symlink's target (e.g. a driver or iommu group name)."""
        try:
            return os.path.basename(os.readlink(self.host(path)).rstrip("/"))
        except OSError:
            return None

    def read_int(self, path: str, base: int = 0) -> int | None:
        text = self.read_text(path)
        if text is None:
            return None
        try:
            return int(text.split()[0], base)
        except (ValueError, IndexError):
            self.problems.append(f"{path}: not an integer: {text[:40]!r}")
            return None
