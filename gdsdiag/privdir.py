"""A private cache directory: the one place gdsdiag keeps files it later executes or trusts.

The sweep dlopen()s a compiled I/O loop from its cache and the trace loads a cached probe
program into the kernel, both often as root. A cache another user can write into is therefore a
way to run code as root (issue 24, item 2: a library planted in ``$XDG_CACHE_HOME/gdsdiag`` ran
its constructor as uid 0; a symlinked ``~/.cache/gdsdiag/bpf`` made root write into, and prune,
a user's directory). The rules, checked on every open, not once:

- the location: ``$GDSDIAG_CACHE_DIR`` if set, else ``/var/cache/gdsdiag`` when running as root
  (never a user's HOME under ``sudo -E``), else ``$XDG_CACHE_HOME/gdsdiag`` or
  ``~/.cache/gdsdiag``;
- every component is opened from ``/`` with O_NOFOLLOW|O_DIRECTORY, relative to the one before
  (``openat``): a symlink anywhere on the path is refused, and nothing can be swapped between a
  check and the use, because the use goes through the descriptor that was checked;
- each ancestor is owned by root or by us, and writable by nobody else unless sticky (``/tmp``);
- the cache directory and its subdirectories are owned by us and not writable by group or others
  (mode 0700; one of ours that is merely readable by others is tightened to 0700);
- a file in it is opened with O_NOFOLLOW relative to the directory's descriptor and fstat-checked:
  a regular file, owned by us, writable by nobody else, one link.

Whatever fails a rule raises ``Refused`` (an OSError), whose text says which component and why;
callers treat it as "no cache" and say so (the sweep runs its Python loop, the trace compiles).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat

ROOT_CACHE = "/var/cache/gdsdiag"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(OSError):
    """A cache path or file that fails a rule above."""


def location() -> str:
    """Where the cache is (not yet checked)."""
    env = os.environ.get("GDSDIAG_CACHE_DIR")
    if env:
        return os.path.abspath(env)
    if os.geteuid() == 0:
        return ROOT_CACHE
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "gdsdiag")


def _check_ancestor(fd: int, shown: str) -> None:
    st = os.fstat(fd)
    me = os.geteuid()
    if st.st_uid not in (0, me):
        raise Refused(f"{shown} is owned by uid {st.st_uid}, not by root or uid {me}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise Refused(f"{shown} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})")


def _check_private(fd: int, shown: str) -> None:
    st = os.fstat(fd)
    me = os.geteuid()
    if st.st_uid != me:
        raise Refused(f"{shown} is owned by uid {st.st_uid}, not by uid {me}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        # someone else could already have put a file in it: never trust it, never "repair" it
        raise Refused(f"{shown} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.fchmod(fd, 0o700)  # ours, but readable by others: a cache of ours need not be


def _step(dfd: int, name: str, shown: str, create: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink, or a file where a directory should be
            raise Refused(f"{shown}: a symlink or not a directory") from None
        raise OSError(e.errno, f"{shown}: {e.strerror}") from None
    try:
        os.mkdir(name, 0o700, dir_fd=dfd)
    except FileExistsError:
        pass  # made meanwhile: the open below checks what it is
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dfd)
    except OSError as e:
        raise Refused(f"{shown}: {e.strerror}") from None


def open_dir(sub: str = "", create: bool = True, base: str | None = None) -> int:
    """A descriptor of the checked cache directory (``sub`` below it), made 0700 where missing.
    The caller closes it. Raises Refused (or another OSError: not writable, no such directory)."""
    top = os.path.abspath(base or location())
    parts = [p for p in top.split("/") if p]
    if not parts:
        raise Refused("/ cannot be a cache directory")
    priv_from = len(parts) - 1  # the cache directory itself and what is below it: ours, 0700
    parts += [p for p in sub.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise Refused(f"{top}/{sub}: '.' or '..' in a cache path")
    fd = os.open("/", _DIR_FLAGS)
    shown = ""
    try:
        _check_ancestor(fd, "/")
        for i, name in enumerate(parts):
            shown += "/" + name
            # create only the cache's own components and the last ancestor's child (~/.cache)
            nfd = _step(fd, name, shown, create and i >= priv_from - 1)
            os.close(fd)
            fd = nfd
            if i >= priv_from:
                _check_private(fd, shown)
            else:
                _check_ancestor(fd, shown)
        return fd
    except BaseException:
        os.close(fd)
        raise


def check_file(fd: int, shown: str) -> os.stat_result:
    """The rules for a file in the cache, on its open descriptor."""
    st = os.fstat(fd)
    me = os.geteuid()
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{shown} is not a regular file")
    if st.st_uid != me:
        raise Refused(f"{shown} is owned by uid {st.st_uid}, not by uid {me}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Refused(f"{shown} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})")
    if st.st_nlink != 1:
        raise Refused(f"{shown} has {st.st_nlink} links (a hard link to another file)")
    return st


def open_file(dfd: int, name: str, shown: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """Open ``name`` in the checked directory ``dfd`` (O_NOFOLLOW) and check it; a descriptor."""
    if "/" in name or name in (".", ".."):
        raise Refused(f"{name!r} is not a plain file name")
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink planted under the name
            raise Refused(f"{shown}: {e.strerror} (a symlink)") from None
        raise
    try:
        check_file(fd, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_into(dfd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Put ``data`` under ``name`` in the checked directory ``dfd``, atomically: written to a fresh
    dotfile there (O_EXCL|O_NOFOLLOW: never a name someone else made), then renamed into place. On
    failure the temporary file is removed (the name is ours: the O_EXCL open made it) and the error
    raised."""
    remove_stale_tmp(dfd)
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours while we live: see remove_stale_tmp
    except OSError:
        pass
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        os.unlink(tmp, dir_fd=dfd)
        raise


_HEX = frozenset("0123456789abcdef")


def _is_tmp_name(n: str) -> bool:
    """replace_into's temporary names, '.NAME.<12 hex>.tmp' (read by position: a regular
    expression with '.+' before the suffix is quadratic on a long name of dots)."""
    return len(n) > 18 and n[0] == "." and n.endswith(".tmp") and n[-17] == "." and _HEX.issuperset(n[-16:-4])


def remove_stale_tmp(dfd: int) -> list[str]:
    """Remove replace_into's temporary files left by a killed run (SIGKILL runs no cleanup): a name of
    that form, a regular file of ours (not followed if a link), whose flock is free -- the kernel
    drops it when the writer dies, so a live writer's file is never touched (workdirs.remove_unlocked).
    Never raises."""
    from .workdirs import remove_unlocked

    try:
        return remove_unlocked(dfd, [n for n in os.listdir(dfd) if _is_tmp_name(n)])
    except OSError:
        return []


def fd_path(fd: int) -> str:
    """A path that names exactly this open file (for dlopen, which takes only a path): the
    kernel resolves /proc/self/fd/N to the inode already checked, whatever the name now holds."""
    return f"/proc/self/fd/{fd}"
