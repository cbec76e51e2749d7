"""Sweep files: only files the sweep creates, recognisable by their header, always removed.

A sweep file is ``gdsdiag-sweep-<pid>-<random>.dat``: created with O_CREAT|O_EXCL|O_NOFOLLOW (an
existing file or a planted symlink is never opened), its first 4 KiB a header naming the tool, the
seed and the size; the data region (the pattern of pattern.py) follows. The sweep keeps that one
descriptor for its whole life — every point, cuFile registration and fio comparison uses it (or
/proc/self/fd/N, the same open file), never the path again — so a file swapped for a symlink
between points is never written through. Every file created is registered here and removed at
the end and on an exception (Ctrl-C arrives as KeyboardInterrupt; SIGTERM is turned into an exit
by the command, which restores the previous handler: this module installs no signal handlers).
"""

from __future__ import annotations

import atexit
import errno
import mmap
import os
import re
import secrets
import stat
import threading

from ..errors import GdsdiagError, UsageError
from . import pattern

HEADER_SIZE = 4096
MAGIC = b"GDSDIAG-SWEEP-FILE v1\n"
_created: dict[str, tuple[int, int]] = {}  # path -> (st_dev, st_ino) of the file we created there
_lock = threading.Lock()
_atexit_registered = False


def _unlink_if_ours(path: str, ident: tuple[int, int]) -> None:
    """Remove ``path`` only while it is still the file we created (same device and inode, not a link)."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == ident:
            os.unlink(path)
    except OSError:
        pass


def _cleanup() -> None:
    with _lock:
        for p, ident in list(_created.items()):
            _unlink_if_ours(p, ident)
            _created.pop(p, None)


def install_cleanup() -> None:
    """Remove created files at interpreter exit too (no signal handlers: see the module text)."""
    global _atexit_registered
    with _lock:
        if not _atexit_registered:
            atexit.register(_cleanup)
            _atexit_registered = True


def remove(path: str) -> None:
    with _lock:
        ident = _created.pop(path, None)
    if ident is not None:
        _unlink_if_ours(path, ident)


def created() -> list[str]:
    with _lock:
        return sorted(_created)


def check_dir(directory: str) -> None:
    if not os.path.isdir(directory):
        raise UsageError(f"{directory} is not a directory", "pass --dir an existing directory on the storage to test")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(
            f"cannot write to {directory}", "choose a directory you may write to, or run with the right user"
        )


def check_space(directory: str, nbytes: int) -> None:
    """Refuse before writing when the filesystem cannot hold the file (with 1 % or 64 MiB to spare)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return
    if st.f_blocks == 0:  # ramfs and some pseudo filesystems report no size at all
        return
    free = st.f_bavail * st.f_frsize
    need = nbytes + HEADER_SIZE + max(64 << 20, nbytes // 100)
    if free < need:
        raise UsageError(
            f"{directory} has {free / 2**30:.2f} GiB free; the sweep file needs {need / 2**30:.2f} GiB",
            "lower --size or free space on that filesystem",
        )


def host_buffer(nbytes: int) -> mmap.mmap:
    """Page-aligned host memory for O_DIRECT: private anonymous pages. Python's default
    ``mmap(-1, n)`` is MAP_SHARED (shmem-backed): O_DIRECT 1 MiB reads into it ran at 0.35-0.54
    GB/s where the same reads into private pages ran at 0.90-1.47 GB/s on the same disk, five
    alternations each (this machine, 2026-11-30) — fio's buffers are private (malloc)."""
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


HUGE = 2 << 20


BUFFER_NAMES = {"huge": "2 MiB-aligned, MADV_HUGEPAGE", "pages": "4 KiB pages"}


def buffer_kind(default: str = "huge") -> str:
    """``huge`` or ``pages`` (4 KiB pages, as fio's malloc buffers are): GDSDIAG_SWEEP_BUFFERS when
    it names one, else ``default`` (the sweep's huge pages, or fio's layout under --compare-fio);
    every result names the kind."""
    v = os.environ.get("GDSDIAG_SWEEP_BUFFERS")
    return v if v in BUFFER_NAMES else default


class IoBuffer:
    """I/O memory on a 2 MiB boundary with MADV_HUGEPAGE: where transparent huge pages are
    available (``madvise`` or ``always``) the buffer is physically contiguous, so a 1 MiB O_DIRECT
    I/O is one segment for the block layer. In 4 KiB pages it was 256 segments, more than a
    virtio disk takes in one request (max_segments 254 here): split in two or three, at 0.29-0.35
    GB/s where the huge-page buffer ran 0.94-1.17 GB/s, same file, alternating (this machine,
    2026-11-30). ``offset`` is where the aligned region starts inside ``mem``."""

    def __init__(self, nbytes: int, kind: str | None = None):
        self.nbytes = nbytes
        self.huge = (kind or buffer_kind()) == "huge"
        self.mem = mmap.mmap(-1, nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if self.huge and hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                self.mem.madvise(mmap.MADV_HUGEPAGE)
            except OSError:
                pass  # THP off: 4 KiB pages, still page aligned
        import ctypes

        addr = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        self.offset = (-addr) % HUGE if self.huge else 0
        # touch each page now, in order: a user write fault allocates the huge page (the first
        # O_DIRECT, the kernel pinning the pages, would not reliably); in 4 KiB pages this is
        # what fio does to its buffers (it fills them at start)
        for off in range(0, nbytes, HUGE if self.huge else 4096):
            self.mem[self.offset + off] = 0
        self.view = memoryview(self.mem)[self.offset : self.offset + nbytes]

    def cdata(self, ffi):
        """A ``char *`` to the aligned region (release with ``release(ffi)``)."""
        self._c = ffi.from_buffer(self.mem)
        return ffi.cast("char *", self._c) + self.offset

    def release(self, ffi) -> None:
        c = self.__dict__.pop("_c", None)
        if c is not None:
            ffi.release(c)

    def close(self) -> None:
        self.view.release()
        self.mem.close()


LOCKED = "locked=1\n"  # this version holds an flock on its file for the file's life
_NAME = re.compile(r"gdsdiag-sweep-[0-9]+-[0-9a-f]{8}\.dat")


def _locked_sweep_file(fd: int) -> bool:
    head = os.pread(fd, HEADER_SIZE, 0)
    return head.startswith(MAGIC) and ("\n" + LOCKED).encode() in head


def remove_leftovers(directory: str) -> list[str]:
    """Sweep files a killed run (SIGKILL, a crash, a power cut) left in ``directory``: ours, with
    the header of a version that locks its file, and whose lock no live process holds. Files of
    older versions (no lock to tell a running sweep from a dead one) are left alone."""
    import sys

    from ..outfile import remove_stale

    gone = remove_stale(directory, lambda n: _NAME.fullmatch(n) is not None, _locked_sweep_file)
    if gone:
        print(f"gdsdiag sweep: removed {len(gone)} file(s) a killed run left in {directory}", file=sys.stderr)
    return gone


def is_sweep_file(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return os.pread(fd, len(MAGIC), 0) == MAGIC
    finally:
        os.close(fd)


def io_error(e: OSError, what: str, path: str) -> GdsdiagError:
    """An OSError of the sweep's own file as one line; ENOSPC and EDQUOT said as such."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return GdsdiagError(
            f"no space left on the filesystem of {path} while {what} (ENOSPC)", "free space or lower --size"
        )
    return GdsdiagError(f"{what} {path}: {e.strerror or e}", "check the storage (dmesg) and permissions")


class SweepFile:
    """A data file of ``size`` bytes (multiple of 4 KiB) in ``directory`` filled with the pattern,
    open once (``fd``: O_RDWR|O_DIRECT) for the sweep's life."""

    def __init__(self, directory: str, size: int, seed: int | None = None):
        check_dir(directory)
        if size <= 0 or size % 4096:
            raise UsageError(f"file size {size} is not a positive multiple of 4 KiB", "use e.g. --size 1G")
        check_space(directory, size)
        install_cleanup()
        remove_leftovers(directory)
        self.seed = seed if seed is not None else secrets.randbits(64)
        self.size = size
        self.fd = -1
        for _ in range(8):
            name = os.path.join(directory, f"gdsdiag-sweep-{os.getpid()}-{secrets.token_hex(4)}.dat")
            try:
                fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_RDWR | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue  # never touch a file (or link) that is already there
            except OSError as e:
                raise io_error(e, "creating a file in", directory) from None
            break
        else:
            raise GdsdiagError(
                "could not find a free sweep file name", "remove stale gdsdiag-sweep-*.dat files you created"
            )
        st = os.fstat(fd)
        self.ident = (st.st_dev, st.st_ino)
        fd = _without_nofollow(fd, self.ident)
        from ..outfile import hold

        hold(fd)  # held for the file's life: a later run knows a free lock as a killed run's file
        with _lock:
            _created[name] = self.ident
        self.path = name
        self.fd = fd
        try:
            buf = host_buffer(HEADER_SIZE)
            try:
                header = MAGIC + f"seed={self.seed}\nsize={size}\npid={os.getpid()}\n{LOCKED}".encode()
                buf.write(header.ljust(HEADER_SIZE, b"\0"))
                self._set_direct()
                os.pwrite(fd, buf, 0)
                # full length at once (sparse until filled): a write-only sweep's warm-up reads and
                # fio's size checks see the file it will be
                os.ftruncate(fd, HEADER_SIZE + size)
            finally:
                buf.close()
        except OSError as e:
            self.remove()
            raise io_error(e, "writing the header of", name) from None
        except GdsdiagError:
            self.remove()
            raise

    def _set_direct(self) -> None:
        import fcntl

        try:
            fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) | os.O_DIRECT)
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise GdsdiagError(
                    f"the filesystem of {os.path.dirname(self.path)} refuses O_DIRECT",
                    "run the sweep on a filesystem with O_DIRECT (ext4, xfs, NFS…); page-cache numbers would be a mirage",
                ) from None
            raise

    def check_same(self) -> None:
        """The descriptor still names the file we created (nothing replaced it under us)."""
        st = os.fstat(self.fd)
        if (st.st_dev, st.st_ino) != self.ident or not stat.S_ISREG(st.st_mode):
            raise GdsdiagError(f"{self.path}'s descriptor changed identity", "this is a bug; report it")

    @property
    def proc_path(self) -> str:
        """A path to the same open file for tools that want a name (kvikio, fio): the /proc magic
        link reopens this inode, whatever the directory entry has become."""
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def fill(self, chunk: int = 8 << 20, progress=None) -> float:
        """Write the whole data region with O_DIRECT (no page-cache copy left behind); seconds taken.
        No fsync: O_DIRECT data is on the device for the reads that follow, and durability is not
        what a benchmark file needs."""
        import time

        from .native import load

        t = time.perf_counter()
        lib, _ = load()
        if lib is not None:
            _fill_native(self, lib, chunk, progress)
        else:
            _fill_python(self, chunk, progress)
        return time.perf_counter() - t

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def remove(self) -> None:
        self.close()
        remove(self.path)


def _without_nofollow(fd: int, ident: tuple[int, int]) -> int:
    """The same open file without O_NOFOLLOW in its status flags: libcufile's handle registration
    refuses a descriptor whose F_GETFL shows it (CU_FILE_INVALID_FILE_OPEN_FLAG, seen on the GPU
    machine). /proc/self/fd/N names the open file itself, not the directory entry, so this cannot
    be redirected by a swapped name; the inode is checked all the same."""
    try:
        fd2 = os.open(f"/proc/self/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return fd  # no /proc: keep the original (cuFile may then refuse it, and says so)
    st = os.fstat(fd2)
    if (st.st_dev, st.st_ino) != ident:
        os.close(fd2)
        return fd
    os.close(fd)
    return fd2


def _fill_python(sf: SweepFile, chunk: int, progress) -> None:
    iob = IoBuffer(chunk)
    try:
        done = 0
        while done < sf.size:
            n = min(chunk, sf.size - done)
            view = iob.view[:n]
            try:
                pattern.host_fill(view, done, sf.seed)
                written = os.pwritev(sf.fd, [view], HEADER_SIZE + done)
            except OSError as e:
                raise io_error(e, "writing", sf.path) from None
            finally:
                view.release()
            if written != n:
                raise GdsdiagError(f"short write while preparing {sf.path}", "check free space")
            done += n
            if progress:
                progress(n)
    finally:
        iob.close()


def _fill_native(sf: SweepFile, lib, chunk: int, progress) -> None:
    """The C loop writes the pattern: sequential, whole file, io_uring depth 4 where it exists."""
    from .native import ffi

    f = ffi()
    bs = chunk
    while sf.size % bs:
        bs //= 2
    depth = 4 if lib.gd_have_uring() else 1
    iob = IoBuffer(bs * depth)
    hist = f.new("uint64_t[]", lib.GD_HIST_N)
    stop = f.new("int *")
    j = f.new("struct gd_job *")
    j.engine = lib.GD_ENGINE_URING if depth > 1 else lib.GD_ENGINE_PSYNC
    j.is_write, j.verify, j.iodepth, j.fd = 1, 1, depth, sf.fd
    j.host_buf = iob.cdata(f)
    j.bs, j.data_base, j.slice_start, j.slice_blocks = bs, HEADER_SIZE, 0, sf.size // bs
    j.seed, j.max_ops, j.stop, j.hist = sf.seed, sf.size // bs, stop, hist
    done = threading.Event()
    out: dict = {}

    def body():
        out["rc"] = lib.gd_run(j)
        done.set()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    try:
        last = 0
        while not done.wait(0.2):
            if progress:
                now = j.bytes
                progress(now - last)
                last = now
        if progress:
            progress(j.bytes - last)
    except BaseException:
        stop[0] = 1
        t.join()
        raise
    finally:
        t.join()
        iob.release(f)  # the export must end before the mmap can close
        iob.close()
    if j.err_kind:
        if j.err_kind == lib.GD_ERR_IO:
            raise io_error(OSError(j.err, os.strerror(j.err)), "writing", sf.path)
        raise GdsdiagError(f"short write while preparing {sf.path} ({j.err_ret} of {bs} bytes)", "check free space")
    if j.bytes != sf.size:
        raise GdsdiagError(f"preparing {sf.path} wrote {j.bytes} of {sf.size} bytes", "check the storage")
