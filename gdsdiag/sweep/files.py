"""Sweep files: only files the sweep creates, recognisable by their header, always removed.

A sweep file is ``gdsdiag-sweep-<pid>-<random>.dat``: created with O_EXCL (an existing file is never
opened for writing), its first 4 KiB a header naming the tool, the seed and the size; the data
region (the pattern of pattern.py) follows. Every file created is registered here and removed at
the end, on an exception, and on SIGINT/SIGTERM.
"""
from __future__ import annotations

import atexit
import errno
import mmap
import os
import secrets
import signal
import threading

from ..errors import GdsdiagError
from . import pattern

HEADER_SIZE = 4096
MAGIC = b"GDSDIAG-SWEEP-FILE v1\n"
_created: set[str] = set()
_lock = threading.Lock()
_handlers_installed = False


def _cleanup() -> None:
    with _lock:
        for p in list(_created):
            try:
                os.unlink(p)
            except OSError:
                pass
            _created.discard(p)


def _on_signal(signum, frame):
    _cleanup()
    # re-raise as the conventional exit so callers and shells see the interruption
    raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


def install_cleanup() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    atexit.register(_cleanup)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
    _handlers_installed = True


def remove(path: str) -> None:
    with _lock:
        if path in _created:
            try:
                os.unlink(path)
            except OSError:
                pass
            _created.discard(path)


def created() -> list[str]:
    with _lock:
        return sorted(_created)


def check_dir(directory: str) -> None:
    if not os.path.isdir(directory):
        raise GdsdiagError(f"{directory} is not a directory", "pass --dir an existing directory on the storage to test")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise GdsdiagError(f"cannot write to {directory}", "choose a directory you may write to, or run with the right user")


def is_sweep_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


class SweepFile:
    """A data file of ``size`` bytes (multiple of 4 KiB) in ``directory`` filled with the pattern."""

    def __init__(self, directory: str, size: int, seed: int | None = None):
        check_dir(directory)
        if size <= 0 or size % 4096:
            raise GdsdiagError(f"file size {size} is not a positive multiple of 4 KiB", "use e.g. --size 1G")
        self.seed = seed if seed is not None else secrets.randbits(64)
        self.size = size
        for _ in range(8):
            name = os.path.join(directory, f"gdsdiag-sweep-{os.getpid()}-{secrets.token_hex(4)}.dat")
            try:
                fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                continue          # never touch a file that is already there
            except OSError as e:
                raise GdsdiagError(f"cannot create a file in {directory}: {e.strerror}", "check permissions and free space") from None
            break
        else:
            raise GdsdiagError("could not find a free sweep file name", "remove stale gdsdiag-sweep-*.dat files you created")
        with _lock:
            _created.add(name)
        self.path = name
        try:
            header = MAGIC + f"seed={self.seed}\nsize={size}\npid={os.getpid()}\n".encode()
            os.write(fd, header.ljust(HEADER_SIZE, b"\0"))
        finally:
            os.close(fd)

    def fill(self, chunk: int = 8 << 20, progress=None) -> None:
        """Write the whole data region with O_DIRECT (no page-cache copy left behind)."""
        fd = open_direct(self.path, os.O_WRONLY)
        buf = mmap.mmap(-1, chunk)
        try:
            done = 0
            while done < self.size:
                n = min(chunk, self.size - done)
                with memoryview(buf)[:n] as view:
                    pattern.host_fill(view, done, self.seed)
                    written = os.pwritev(fd, [view], HEADER_SIZE + done)
                if written != n:
                    raise GdsdiagError(f"short write while preparing {self.path}", "check free space")
                done += n
                if progress:
                    progress(n)
            os.fsync(fd)
        finally:
            os.close(fd)
            buf.close()

    def remove(self) -> None:
        remove(self.path)


def open_direct(path: str, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_DIRECT)
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise GdsdiagError(f"the filesystem of {os.path.dirname(path)} refuses O_DIRECT",
                               "run the sweep on a filesystem with O_DIRECT (ext4, xfs, NFS…); page-cache numbers would be a mirage") from None
        raise GdsdiagError(f"cannot open {path}: {e.strerror}", "check permissions") from None
