"""Files gdsdiag writes: opened once, never through a planted name, complete or removed.

Every output path a user names (``sweep --csv/--plot``, ``report --png``, ``validate --json``…)
is opened once with O_CREAT|O_EXCL|O_NOFOLLOW and written through that one descriptor: an
existing file or a symlink planted at the name (even after the start-up check) is never written
through, and a failed O_EXCL open never deletes anything (the name was not ours). What we created
is ours: a write that fails (a full disk, a quota) removes it again, so no 0-byte or cut file is
left to block the rerun ("exists").

Work files (a snapshot's ``.partial``, the sweep's data file) are held under an exclusive flock
for their whole life; ``remove_stale`` finds those of killed runs (the lock is free: the kernel
releases it when the process dies, even on SIGKILL) and removes them on the next run.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable
from typing import IO, BinaryIO

from .errors import GdsdiagError

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


# Outputs hold the node's data (hostnames, driver versions, PCI addresses, process names, paths):
# readable by their owner only unless a reader that is another user needs them (replace_own).
PRIVATE = 0o600
SHARED = 0o644  # node_exporter's textfile collector and NFD's worker read these as their own user


def open_new(path: str, option: str, mode: int = PRIVATE) -> int:
    """A descriptor of a file created at ``path`` now, or one clear GdsdiagError."""
    try:
        return os.open(path, _NEW, mode)
    except FileExistsError:
        raise GdsdiagError(f"{path} exists", f"choose another {option} path; gdsdiag never overwrites files") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise GdsdiagError(f"{path} is a symlink", f"choose another {option} path") from None
        raise GdsdiagError(f"cannot write {path}: {e.strerror}", f"choose a writable {option} path") from None


def discard(path: str, fd: int) -> None:
    """Remove ``path`` if it still names the file open on ``fd`` (ours), then close ``fd``."""
    try:
        st = os.fstat(fd)
        cur = os.lstat(path)
        if (cur.st_dev, cur.st_ino) == (st.st_dev, st.st_ino) and stat.S_ISREG(cur.st_mode):
            os.unlink(path)
    except OSError:
        pass
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def write_new(path: str, option: str, write: Callable[[BinaryIO], object], mode: int = PRIVATE) -> None:
    """Create ``path`` (see open_new), let ``write`` fill it, flush and fsync; on any failure the
    file is removed and the error said in one line."""
    fd = open_new(path, option, mode)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:  # closing it flushes; the descriptor stays ours
            write(f)
        os.fsync(fd)
    except OSError as e:
        discard(path, fd)
        why = "no space left on the filesystem (ENOSPC)" if e.errno in (errno.ENOSPC, errno.EDQUOT) else e.strerror
        raise GdsdiagError(f"cannot write {path}: {why or e}", f"free space or choose another {option} path") from None
    except BaseException:
        discard(path, fd)
        raise
    os.close(fd)


def write_new_bytes(path: str, option: str, data: bytes, mode: int = PRIVATE) -> None:
    write_new(path, option, lambda f: f.write(data), mode)


def hold(fd: int) -> None:
    """Mark a work file as in use for this process's life (see remove_stale)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass  # a filesystem without flock: its leftovers are not found later, nothing worse


def remove_stale(directory: str, match: Callable[[str], bool], looks_ours: Callable[[int], bool]) -> list[str]:
    """Remove work files of killed runs in ``directory``: a name ``match`` accepts, a regular file
    (not followed if a link) of the running user whose content ``looks_ours``, and whose flock is
    free (no live process holds it; workdirs.remove_unlocked). Returns the names removed; never raises."""
    from .workdirs import remove_unlocked

    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        return remove_unlocked(dfd, [n for n in os.listdir(dfd) if match(n)], looks_ours)
    except OSError:
        return []
    finally:
        os.close(dfd)


def replace_own(path: str, data: bytes, mark: str, option: str, what: str, hidden_tmp: bool = False) -> None:
    """Replace a file a reader rereads on every pass (node_exporter's textfile, NFD's feature file):
    only a regular file gdsdiag wrote itself (its first bytes are ``mark``) is replaced, atomically by
    rename; anything else (another tool's file, a FIFO, a device) is refused without blocking on it.
    The new text goes to a fresh name first (O_EXCL|O_NOFOLLOW, complete or removed; a dotfile with
    hidden_tmp, which NFD skips); a name already taken is never deleted, since it is not ours."""
    import secrets
    import stat

    from .errors import GdsdiagError

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = -1
    except OSError as e:
        raise GdsdiagError(f"cannot read {path}: {e.strerror}", f"choose another {option} path") from None
    if fd >= 0:
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            head = os.read(fd, len(mark)).decode("utf-8", "replace") if regular else ""
        except OSError as e:
            raise GdsdiagError(f"cannot read {path}: {e.strerror}", f"choose another {option} path") from None
        finally:
            os.close(fd)
        if not regular:
            raise GdsdiagError(f"{path} exists and is not a regular file", f"choose another {option} path")
        if head != mark:
            raise GdsdiagError(
                f"{path} exists and was not written by gdsdiag",
                f"choose another {option} path; gdsdiag only replaces its own {what}",
            )
    d, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(d, f"{'.' if hidden_tmp else ''}{base}.gdsdiag-tmp-{secrets.token_hex(6)}")
    try:
        write_new_bytes(tmp, option, data, SHARED)  # read by node_exporter / NFD, often not as root
    except GdsdiagError as e:  # (named by the file the user gave, not our temporary name)
        raise GdsdiagError(e.cause.replace(tmp, path), e.fix) from None
    try:
        os.replace(tmp, path)
    except OSError as e:
        os.unlink(tmp)  # created by us just above
        raise GdsdiagError(f"cannot write {path}: {e.strerror}", f"choose a writable {option} path") from None


class NewTextFile:
    """A text output written piece by piece over a long run (``trace --record``): created like
    ``open_new`` (O_EXCL|O_NOFOLLOW, mode 0600: it holds the node's process names and paths), and a
    write that fails (a full disk) raises one GdsdiagError naming the file instead of an OSError
    from deep inside the run; ``discard`` then removes what was written, so no cut file is left."""

    def __init__(self, path: str, option: str, mode: int = PRIVATE):
        self.path, self.option = path, option
        self.fd = open_new(path, option, mode)
        if path.endswith(".gz"):
            # a name that says gzip gets gzip (level 1: a trace records ~100k events a second; the
            # reader sniffs the magic either way, and reads a stream cut short up to where it ends)
            import gzip
            import io

            self._raw: IO[bytes] | None = os.fdopen(self.fd, "wb", closefd=False)
            z = gzip.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=self._raw)
            self._f: IO[str] = io.TextIOWrapper(z, encoding="utf-8")
        else:
            self._raw = None
            self._f = os.fdopen(self.fd, "w", closefd=False)
        self.failed = False
        self.written = 0

    def _error(self, e: OSError) -> GdsdiagError:
        self.failed = True
        why = "no space left on the filesystem (ENOSPC)" if e.errno in (errno.ENOSPC, errno.EDQUOT) else e.strerror
        return GdsdiagError(f"cannot write {self.path}: {why or e}", f"free space or choose another {self.option} path")

    def write(self, text: str) -> int:
        try:
            n = self._f.write(text)
        except OSError as e:
            raise self._error(e) from None
        self.written += n
        return n

    def flush(self) -> None:
        try:
            self._f.flush()
        except OSError as e:
            raise self._error(e) from None

    def tell(self) -> int:
        """Characters written so far (0: nothing was recorded)."""
        return self.written

    def empty_on_disk(self) -> bool:
        """Nothing of it reached the file (a disk full from the first flush on: what was written
        is still in the buffer), so there is nothing to keep."""
        if self.fd < 0:
            return False
        try:
            return os.fstat(self.fd).st_size == 0
        except OSError:
            return False

    def close(self) -> None:
        """Flush and close; a flush that fails is raised (the file is then discarded by the caller)."""
        if self.fd < 0:
            return
        try:
            self._f.close()  # flushes what is buffered (and ends a gzip stream)
            if self._raw is not None:
                self._raw.close()  # (GzipFile leaves the file it was given open, its buffer unflushed)
        except OSError as e:
            raise self._error(e) from None
        finally:
            if not self.failed:
                os.close(self.fd)
                self.fd = -1

    def discard(self) -> None:
        """Remove the file (still ours: same inode) and close it."""
        if self.fd < 0:
            return
        try:
            self._f.close()
        except OSError:
            pass
        discard(self.path, self.fd)
        self.fd = -1
