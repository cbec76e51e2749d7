"""Files and programs the environment names, when gdsdiag runs as root.

``sudo -E`` (and a root shell that kept a user's environment) hands a root gdsdiag whatever the
user set: ``GDSDIAG_LIBCUFILE`` and ``CUDA_HOME`` (a library loaded in process), ``CC`` (run as
the compiler; its output cached as root's I/O loop), ``GDSDIAG_FIO`` (run), and the files
``snapshot`` copies into a bundle that is sent outside (``CUFILE_ENV_PATH_JSON``,
``CUFILE_LOGFILE_PATH``). Issue 42, item 5: each took a file another user owned, so that user's
code ran as root, or a file only root could read left the node.

The rule, for a root process only (a user's gdsdiag uses what the user's own environment names):
the file, resolved to its real path, and every directory above it must be owned by root and
writable by no one else (group root aside; a sticky directory such as /tmp counts as not
writable, since no one else can swap root's file in it). The caller then uses the path as named
when no one else could change it or a link on it, else the checked real path, so a link
retargeted after the check changes nothing. A file to be copied out must also be
readable by every user of the node: a bundle never carries what only root may read.

``--allow-user-files`` (or ``GDSDIAG_ALLOW_USER_FILES=1``, which the flag sets so that child
processes inherit it) uses such a file anyway and says so on stderr. The privdir module holds the
stricter rules of the cache gdsdiag writes itself.
"""

from __future__ import annotations

import os
import stat
import sys

from .errors import GdsdiagError

ALLOW_ENV = "GDSDIAG_ALLOW_USER_FILES"
FIX = "pass --allow-user-files to use it anyway, or unset {var}"


def allow_user_files() -> None:
    """What --allow-user-files does: the environment carries it to child processes too."""
    os.environ[ALLOW_ENV] = "1"


def _allowed() -> bool:
    return os.environ.get(ALLOW_ENV) == "1"


def _writable_by_others(st: os.stat_result) -> bool:
    if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
        return False  # sticky (/tmp): another user cannot rename or remove root's entry in it
    group = st.st_mode & stat.S_IWGRP and st.st_gid != 0
    return bool(group or st.st_mode & stat.S_IWOTH)


def chain_problem(real: str) -> str | None:
    """Why a user other than root could change the file at ``real`` (a path with no links in it:
    os.path.realpath's) or a directory above it; None when none could."""
    path = "/"
    parts = [p for p in real.split("/") if p]
    for i in range(len(parts) + 1):
        if i:
            path = os.path.join(path, parts[i - 1])
        try:
            st = os.lstat(path)
        except OSError as e:
            return f"{path}: {e.strerror}"
        if st.st_uid != 0:
            return f"{path} is owned by uid {st.st_uid}{_user(st.st_uid)}, not root"
        if _writable_by_others(st):
            return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _links_problem(given: str) -> str | None:
    """Why the path as given (links not resolved) could be changed by another user: each of its
    prefixes, a link or not, owned by root and not writable by others; None when none could."""
    parts = [p for p in given.split("/") if p]
    for i in range(1, len(parts) + 1):
        prefix = "/" + "/".join(parts[:i])
        try:
            st = os.lstat(prefix)
        except OSError as e:
            return f"{prefix}: {e.strerror}"
        if st.st_uid != 0:
            return f"{prefix} is owned by uid {st.st_uid}"
        if not stat.S_ISLNK(st.st_mode) and _writable_by_others(st):
            return f"{prefix} is writable by others"
    return None


def _user(uid: int) -> str:
    try:
        import pwd

        return f" ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return ""


def trusted(var: str, path: str, use: str) -> str:
    """The path to use for ``path``, which the environment variable ``var`` names and gdsdiag will
    ``use`` ("load", "run"), checked as above when running as root: the path as given (absolute)
    when it and what it resolves to are both safe, so a program that reads its own name (a ccache
    link named gcc) still runs as itself; else the real path, whose chain was checked. A path
    that names nothing is returned as it is (the caller says so in its own words). Raises
    GdsdiagError (exit 3) for a file another user could have planted, unless --allow-user-files."""
    if os.geteuid() != 0:
        return path
    real = os.path.realpath(path)
    if not os.path.exists(real):
        return path
    why = chain_problem(real)
    if why is None:
        given = os.path.abspath(path)
        return given if _links_problem(given) is None else real
    if _allowed():
        _note(var, path, why)
        return real
    raise GdsdiagError(
        f"{var}={path}: {why}; as root gdsdiag will {use} only files that root owns and no one else can write",
        FIX.format(var=var),
    )


def open_to_copy(var: str, path: str) -> int:
    """A descriptor of ``path`` (named by ``var``) to copy into a bundle. As root: the checks of
    ``trusted``, and the file must be readable by every user (a 0600 root file never leaves the
    node); the descriptor is opened on the checked real path with O_NOFOLLOW and fstat-checked
    again, so what is read is what was checked. Raises GdsdiagError or OSError."""
    real = trusted(var, path, "copy into a bundle")
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    if os.geteuid() != 0:
        return fd
    st = os.fstat(fd)
    if not st.st_mode & stat.S_IROTH:  # (--allow-user-files does not lift this: a secret stays)
        os.close(fd)
        raise GdsdiagError(
            f"{var}={path}: {real} is readable only by its owner and group (mode {stat.S_IMODE(st.st_mode):04o}); "
            "a bundle carries only what every user of the node may read",
            f"unset {var}, or copy the file by hand after reviewing it",
        )
    return fd


def program(var: str, name: str) -> str | None:
    """The program ``var`` names (a path, or a name found on PATH), checked as ``trusted``; None
    when there is none."""
    import shutil

    found = shutil.which(name)
    return None if found is None else trusted(var, found, "run")


def _note(var: str, path: str, why: str) -> None:
    """The output says when a user's file is used (issue 42): one line on stderr."""
    print(f"gdsdiag: using {var}={path} although {why} (--allow-user-files)", file=sys.stderr, flush=True)
