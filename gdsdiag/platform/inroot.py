"""Open a file inside a directory tree as if that tree were ``/``: openat2(RESOLVE_IN_ROOT).

A ``--root`` tree may hold links such as ``etc/cufile.json -> /etc/shadow`` or
``sys/bus/pci/devices/X -> /sys/devices/...``: with plain open() the first reads a host file and
the second reads the host's own sysfs instead of the tree's. openat2 with RESOLVE_IN_ROOT
(Linux 5.6) resolves every component, links included, with the tree as its root, in the kernel,
atomically. Where the kernel or a seccomp profile lacks it, ``FsRoot`` falls back to resolving the
path itself and opening the result with O_NOFOLLOW.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

SYS_OPENAT2 = 437  # the same number on every Linux architecture (asm-generic)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_IN_ROOT = 0x10
AT_FDCWD = -100


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class Unsupported(Exception):
    pass


_libc = None
_supported = True
# The constant arguments, made once: a large node's topology opens 1,000+ device directories
# through here, and building the ctypes objects cost a third of each call. ``_hows`` keeps one
# open_how per flags value (the struct is only read by the kernel).
_NR = ctypes.c_long(SYS_OPENAT2)
_HOW_SIZE = ctypes.c_size_t(ctypes.sizeof(_OpenHow))
_hows: dict[tuple[int, int], _OpenHow] = {}
# os.fsencode's codec, looked up once
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


def open_in_root(rootfd: int, path: str, flags: int, resolve: int = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) -> int:
    """A descriptor for ``path`` (absolute or relative, resolved inside ``rootfd``); OSError as
    open() raises it; Unsupported when openat2 cannot be used here. RESOLVE: openat2's resolve
    flags (``open_no_links`` passes RESOLVE_NO_SYMLINKS: no link anywhere on the path)."""
    global _libc, _supported
    if not _supported:
        raise Unsupported()
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    how = _hows.get((flags, resolve))
    if how is None:
        how = _hows[flags, resolve] = _OpenHow(flags, 0, resolve)
    rel = resolve & RESOLVE_IN_ROOT  # (inside a root, a path is relative to it; else as given)
    fd = _libc.syscall(
        _NR,
        rootfd,  # a Python int passes as a C int
        ((path.lstrip("/") or ".") if rel else path).encode(_FS_ENCODING, _FS_ERRORS),  # bytes pass as char *
        ctypes.byref(how),
        _HOW_SIZE,
    )
    if fd >= 0:
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG):
        _supported = False  # old kernel, or a seccomp filter that forbids it
        raise Unsupported()
    raise OSError(err, os.strerror(err), path)


def open_no_links(path: str, flags: int) -> int:
    """A descriptor for the absolute ``path`` where no component of it is a link (a directory a
    user could swap for a link to a root-only file is refused, not followed: the trace reads files
    a traced program named as root); OSError, or Unsupported without openat2."""
    return open_in_root(AT_FDCWD, path, flags, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
