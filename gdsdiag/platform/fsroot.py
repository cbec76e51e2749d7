"""A filesystem root that every platform reader goes through.

Readers never touch ``/`` directly: they ask an ``FsRoot`` so that a live node, an unpacked
``gdsdiag snapshot`` and hwloc's test trees are read by exactly the same code. Symbolic links
are resolved *inside* the root (an absolute target such as ``/sys/devices/...`` in a snapshot is
re-rooted), and every read failure comes back as ``None`` plus a remembered reason.
"""

from __future__ import annotations

import errno
import os
import stat
from types import ModuleType

from ..bounded import check_regular


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
        # os.path.join(self.root, path.lstrip("/")), spelt out: called for thousands of files
        # (self.root is absolute and ends in "/" only when it is "/")
        return ("/" if self.root == "/" else self.root + "/") + path.lstrip("/")

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
        out = _link_target(path, target)
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
        rootfd = self.__dict__.get("_rootfd")
        if rootfd is None:
            rootfd = self._rootfd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        inroot = _inroot()  # ctypes: loaded only under --root
        try:
            return inroot.open_in_root(rootfd, path, flags)
        except inroot.Unsupported:
            return os.open(self.host(self.resolve(path)), flags | os.O_NOFOLLOW)

    def __del__(self):
        fd = self.__dict__.get("_rootfd")
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def attrs(self, path: str) -> AttrDir:
        """The attribute files of one directory (a sysfs device), read through one directory
        descriptor: a large node has ~7 attribute files for each of 1,000+ functions, and resolving
        the whole path for each (openat2 under --root) was most of `topology`'s time (docs/benchmarks-history.md).
        Close it (``with``)."""
        return AttrDir(self, path, self._dirfd(path))

    def link_attrs(self, path: str) -> tuple[str, AttrDir]:
        """``follow_link(path)`` and ``attrs()`` of the directory it names, in two system calls
        (readlink, then one open of the target that fails unless it is a directory and not a
        link, which is follow_link's own test); anything else takes the long way."""
        try:
            target = os.readlink(self.host(path))
        except OSError:
            real = self.follow_link(path)
            return real, self.attrs(real)
        out = _link_target(path, target)
        try:
            fd = self._open(out, _DIR_FLAGS)
        except OSError:
            real = self.resolve(path)
            return real, self.attrs(real)
        return out, AttrDir(self, out, fd)

    def _dirfd(self, path: str) -> int | None:
        flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
        try:
            return self._open(path, flags)
        except OSError:
            return None  # missing or not a directory: AttrDir answers through the full paths

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
        return _to_int(self, path, text, base)


def _link_target(path: str, target: str) -> str:
    """Where the link at ``path`` (absolute, inside the root) points: ``target`` made absolute and
    normal. os.path.join(os.path.dirname(path), target), spelt out: thousands of calls on a large node."""
    return os.path.normpath(target if target.startswith("/") else path.rpartition("/")[0] + "/" + target)


def _inroot():  # the module, imported at the first --root open (it loads ctypes)
    global _INROOT
    if _INROOT is None:
        from . import inroot

        _INROOT = inroot
    return _INROOT


_INROOT: ModuleType | None = None


def _to_int(fs: FsRoot, path: str, text: str, base: int) -> int | None:
    # a sysfs number is one short ASCII token ("0x10de", "-1", "16"): int() would also take
    # '٣', '1_0' and, in base 16, a million digits whose decimal str() later fails (issue 24)
    try:
        tok = text.split()[0]
        if len(tok) > 24 or not tok.isascii() or "_" in tok:
            raise ValueError(tok)
        return int(tok, base)
    except (ValueError, IndexError):
        fs.problems.append(f"{path}: not an integer: {text[:40]!r}")
        return None


_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ATTR_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW


class AttrDir:
    """``FsRoot``'s read_text / read_int / read_bytes / readlink_name for the files of one
    directory, answering exactly as the FsRoot would for ``f"{path}/{name}"`` (same data, same
    problems) with fewer system calls: each file is opened relative to the directory's descriptor
    with O_NOFOLLOW. A file that is itself a link (ELOOP) is read through the FsRoot, so a link in
    a --root tree still resolves inside the tree. Without a descriptor (an archive root, a missing
    directory) every call goes through the FsRoot."""

    def __init__(self, fs: FsRoot, path: str, fd: int | None):
        self.fs, self.path, self.fd = fs, path.rstrip("/"), fd

    def __enter__(self) -> AttrDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def read_checked(
        self, name: str, max_bytes: int | None, limit: int | None = None
    ) -> tuple[bytes | None, str | None]:
        if self.fd is None:
            return self.fs.read_checked(f"{self.path}/{name}", max_bytes, limit)
        try:
            fd = os.open(name, _ATTR_FLAGS, dir_fd=self.fd)
        except OSError as e:
            if e.errno == errno.ELOOP:  # the attribute is a link: resolve it as the FsRoot does
                return self.fs.read_checked(f"{self.path}/{name}", max_bytes, limit)
            return None, e.strerror or str(e)
        try:
            st = os.fstat(fd)
            if not (st.st_mode & 0o170000 == stat.S_IFREG and (max_bytes is None or st.st_size <= max_bytes)):
                # the FsRoot's own read says "Is a directory" as open() does for a directory
                return None, os.strerror(errno.EISDIR) if stat.S_ISDIR(st.st_mode) else check_regular(st, max_bytes)
            want = limit if limit is not None else st.st_size if st.st_size > 4096 else 4096
            data = os.read(fd, want)
            # A short read is the end: a regular file returns all it has, and sysfs hands over a
            # whole attribute in its first read. Only a full read (a file that grew since fstat)
            # reads on, as f.read() would.
            if limit is None and len(data) == want:
                parts = [data]
                while chunk := os.read(fd, 65536):
                    parts.append(chunk)
                data = b"".join(parts)
            return data, None
        except OSError as e:
            return None, e.strerror or str(e)
        finally:
            os.close(fd)

    def read_bytes(self, name: str, note: bool = False, limit: int | None = None) -> bytes | None:
        data, why = self.read_checked(name, self.fs.MAX_FILE, limit)
        if data is None and note:
            self.fs.problems.append(f"{self.path}/{name}: {why}")
        return data

    def read_text(self, name: str) -> str | None:
        data = self.read_checked(name, self.fs.MAX_FILE)[0]
        return None if data is None else data.decode("utf-8", "replace").strip()

    def read_int(self, name: str, base: int = 0) -> int | None:
        text = self.read_text(name)
        return None if text is None else _to_int(self.fs, f"{self.path}/{name}", text, base)

    def readlink_name(self, name: str) -> str | None:
        if self.fd is None:
            return self.fs.readlink_name(f"{self.path}/{name}")
        try:
            return os.readlink(name, dir_fd=self.fd).rstrip("/").rpartition("/")[2]  # the basename
        except OSError:
            return None
