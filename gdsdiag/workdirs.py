"""Private temporary directories that a killed run leaves behind and the next run removes.

A run that dies by SIGKILL (an OOM kill, a job scheduler's timeout) runs no cleanup: its compiler
directory, its sweep output or its probe cells stay in /tmp or on the storage under test. Each such
directory is made here (mkdtemp: mode 0700, a fresh name) and held with an flock on its descriptor
for as long as the run uses it; the kernel drops the lock when the process dies. ``remove_stale``
then removes the directories of a prefix whose lock is free, that the running user owns and that
are older than STALE_S (so a run that has just made one and not yet locked it is never touched)."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable

STALE_S = 60.0  # a directory younger than this is never removed (made, not yet locked)
MAX_SCAN = 1000  # names looked at per call: a directory of a million look-alikes costs no more


class WorkDir:
    """``with WorkDir("gdsdiag-cc-") as path:`` — made, locked, removed at the end (or by the next
    run's ``remove_stale`` if this process is killed)."""

    def __init__(self, prefix: str, parent: str | None = None):
        self.prefix, self.parent = prefix, parent
        self.path = ""
        self._fd = -1

    def __enter__(self) -> str:
        self.path = tempfile.mkdtemp(prefix=self.prefix, dir=self.parent)
        self._fd = hold(self.path)
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._fd)


def hold(path: str) -> int:
    """Lock a work directory this process just made (mkdtemp) for as long as the descriptor returned
    stays open: ``remove_stale`` of a later run leaves it alone until then."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (ours alone: a fresh directory)
    return fd


def remove_stale(prefix: str, parent: str | None = None) -> list[str]:
    """Remove the work directories of killed runs under ``parent`` (default: the temporary
    directory) whose names start with ``prefix``: directories (not links) of the running user,
    older than STALE_S, whose flock is free. Returns the names removed; never raises."""
    parent = parent or tempfile.gettempdir()
    try:
        dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        names = [n for n in os.listdir(dfd) if n.startswith(prefix)]
        return remove_unlocked(dfd, names, min_age_s=STALE_S, dirs_under=parent)
    except OSError:
        return []
    finally:
        os.close(dfd)


def remove_unlocked(
    dfd: int,
    names: Iterable[str],
    looks_ours: Callable[[int], bool] | None = None,
    min_age_s: float = 0.0,
    dirs_under: str | None = None,
) -> list[str]:
    """The one way gdsdiag removes what a killed run left: each of ``names`` in the directory open as
    ``dfd`` that is a regular file (a directory when ``dirs_under`` names that directory's path), not
    a link, of the running user, older than ``min_age_s``, that ``looks_ours`` (given its
    descriptor), and whose flock is free -- the kernel drops a lock when its process dies, so a live
    run's file is never touched. At most MAX_SCAN names; returns those removed; never raises."""
    removed: list[str] = []
    me, now = os.geteuid(), time.time()
    kind = os.O_DIRECTORY if dirs_under is not None else os.O_NONBLOCK  # (a FIFO never blocks the open)
    for name in list(names)[:MAX_SCAN]:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | kind, dir_fd=dfd)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            ok = stat.S_ISDIR(st.st_mode) if dirs_under is not None else stat.S_ISREG(st.st_mode)
            if not ok or st.st_uid != me or now - st.st_mtime < min_age_s:
                continue
            if looks_ours is not None and not looks_ours(fd):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: a run in progress
            cur = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if (cur.st_dev, cur.st_ino) != (st.st_dev, st.st_ino):
                continue  # (replaced meanwhile: not the entry checked)
            if dirs_under is not None:
                shutil.rmtree(os.path.join(dirs_under, name), ignore_errors=True)
            else:
                os.unlink(name, dir_fd=dfd)
            removed.append(name)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed
