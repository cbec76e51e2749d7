"""Buffers, file handles and I/O: sync, batch and stream-ordered. Thin over libcufile: each method
is one C call plus error decoding, and every registration is undone by a context manager."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ._lib import Library, load
from .errors import CuFileError, CuFileOSError, check, check_ssize, error_for

if TYPE_CHECKING:
    from ._types import CuFileStatus


def device_pointer(obj) -> tuple[int, int | None]:
    """(address, nbytes) of GPU memory: a raw int pointer, anything with
    ``__cuda_array_interface__`` (cupy, numba, torch), or an object with ``.data.ptr``."""
    if isinstance(obj, int):
        return obj, None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr = cai["data"][0]
        shape = cai.get("shape", ())
        strides = cai.get("strides")
        itemsize = int(cai["typestr"][2:])
        n = itemsize
        for s in shape:
            n *= s
        if strides is not None:
            # cuFile moves one contiguous range: refuse strided views rather than corrupt memory
            expect = itemsize
            for dim, st in zip(reversed(shape), reversed(strides)):
                if dim > 1 and st != expect:
                    raise ValueError("non-contiguous GPU array: pass a contiguous array (cupy.ascontiguousarray)")
                expect *= dim
        return ptr, n
    data = getattr(obj, "data", None)
    if data is not None and hasattr(data, "ptr"):
        return int(data.ptr), getattr(obj, "nbytes", None)
    raise TypeError(f"{type(obj).__name__} is not GPU memory (int pointer or __cuda_array_interface__)")


class _Registration:
    """A libcufile registration, undone at most once: ``register()`` / ``deregister()`` or a
    ``with`` block. Subclasses name the two calls."""

    registered: bool

    def _register(self) -> tuple[str, CuFileStatus]:
        raise NotImplementedError

    def _deregister(self) -> tuple[str, CuFileStatus]:
        raise NotImplementedError

    def register(self: _R) -> _R:
        check(*self._register())
        self.registered = True
        return self

    def deregister(self) -> None:
        if self.registered:
            self.registered = False
            check(*self._deregister())

    def __enter__(self: _R) -> _R:
        return self.register()

    def __exit__(self, *exc) -> None:
        self.deregister()


_R = TypeVar("_R", bound=_Registration)


class BufferRegistration(_Registration):
    """``with BufferRegistration(arr):`` — cuFileBufRegister / cuFileBufDeregister."""

    RDMA_REGISTER = 1
    RDMA_RELAXED_ORDERING = 2

    def __init__(self, buf, nbytes: int | None = None, flags: int = 0, library: Library | None = None):
        self.L = library or load()
        self.ptr, n = device_pointer(buf)
        size = nbytes if nbytes is not None else n
        if size is None:
            raise ValueError("nbytes is required for a raw pointer")
        self.nbytes: int = size
        self.flags = flags
        self.registered = False
        self._keep = buf

    def _register(self) -> tuple[str, CuFileStatus]:
        return "cuFileBufRegister", self.L.lib.cuFileBufRegister(
            self.L.ffi.cast("void *", self.ptr), self.nbytes, self.flags
        )

    def _deregister(self) -> tuple[str, CuFileStatus]:
        return "cuFileBufDeregister", self.L.lib.cuFileBufDeregister(self.L.ffi.cast("void *", self.ptr))


class FileHandle:
    """A file registered with cuFile. ``FileHandle(path, "r")`` opens with O_DIRECT by default;
    ``FileHandle(fd=...)`` registers a descriptor the caller owns (O_DIRECT or not: libcufile decides
    what it can do with it, and the bindings report it)."""

    def __init__(
        self,
        path: str | None = None,
        mode: str = "r",
        *,
        fd: int | None = None,
        direct: bool = True,
        create_mode: int = 0o644,
        library: Library | None = None,
    ):
        self.L = library or load()
        self._own_fd = fd is None
        if fd is None:
            if path is None:
                raise ValueError("give a path or an fd")
            flags = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT, "r+": os.O_RDWR, "w+": os.O_RDWR | os.O_CREAT}[
                mode
            ]
            if direct:
                flags |= os.O_DIRECT
            fd = os.open(path, flags, create_mode)
        self.fd = fd
        self.path = path
        try:
            self.direct = bool(_fd_flags(fd) & os.O_DIRECT)
        except OSError as e:
            self.fd = -1
            raise CuFileOSError("FileHandle", e.errno or 0) from None
        self._descr = self.L.ffi.new("CUfileDescr_t *")
        self._handle = self.L.ffi.new("CUfileHandle_t *")
        self.registered = False

    def register(self) -> FileHandle:
        d = self._descr
        d.type = self.L.lib.CU_FILE_HANDLE_TYPE_OPAQUE_FD
        d.handle.fd = self.fd
        d.fs_ops = self.L.ffi.NULL
        try:
            check("cuFileHandleRegister", self.L.lib.cuFileHandleRegister(self._handle, d))
        except CuFileError:
            self._close_fd()
            raise
        self.registered = True
        return self

    @property
    def handle(self):
        if not self.registered:
            raise error_for("FileHandle", 5027, detail="the handle is not registered (closed or never registered)")
        return self._handle[0]

    def deregister(self) -> None:
        if self.registered:
            self.registered = False
            self.L.lib.cuFileHandleDeregister(self._handle[0])
        self._close_fd()

    close = deregister

    def _close_fd(self) -> None:
        if self._own_fd and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    __enter__ = register

    def __exit__(self, *exc) -> None:
        self.deregister()

    def read(self, buf, size: int, file_offset: int = 0, buf_offset: int = 0) -> int:
        ptr, _ = device_pointer(buf)
        ret = self.L.lib.cuFileRead(self.handle, self.L.ffi.cast("void *", ptr), size, file_offset, buf_offset)
        return check_ssize("cuFileRead", ret, self.L.ffi.errno)

    def write(self, buf, size: int, file_offset: int = 0, buf_offset: int = 0) -> int:
        ptr, _ = device_pointer(buf)
        ret = self.L.lib.cuFileWrite(self.handle, self.L.ffi.cast("void *", ptr), size, file_offset, buf_offset)
        return check_ssize("cuFileWrite", ret, self.L.ffi.errno)

    # --- stream-ordered -----------------------------------------------------------------------
    def read_async(self, buf, size: int, file_offset: int, buf_offset: int, stream) -> AsyncOp:
        return AsyncOp(self, "read", buf, size, file_offset, buf_offset, stream)

    def write_async(self, buf, size: int, file_offset: int, buf_offset: int, stream) -> AsyncOp:
        return AsyncOp(self, "write", buf, size, file_offset, buf_offset, stream)


def _fd_flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


def _stream_ptr(stream) -> int:
    if stream is None or stream == 0:
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("ptr", "handle", "cuda_stream"):
        v = getattr(stream, attr, None)
        if v is not None:
            return int(v)
    raise TypeError("stream must be an int handle or have .ptr (cupy) / .cuda_stream (torch)")


class StreamRegistration(_Registration):
    """``with StreamRegistration(stream, flags):`` — cuFileStreamRegister / Deregister."""

    FIXED_BUF_OFFSET, FIXED_FILE_OFFSET, FIXED_FILE_SIZE, PAGE_ALIGNED_INPUTS = 1, 2, 4, 8

    def __init__(self, stream, flags: int = 0, library: Library | None = None):
        self.L = library or load()
        self.stream = _stream_ptr(stream)
        self.flags = flags
        self.registered = False

    def _register(self) -> tuple[str, CuFileStatus]:
        return "cuFileStreamRegister", self.L.lib.cuFileStreamRegister(
            self.L.ffi.cast("CUstream", self.stream), self.flags
        )

    def _deregister(self) -> tuple[str, CuFileStatus]:
        return "cuFileStreamDeregister", self.L.lib.cuFileStreamDeregister(self.L.ffi.cast("CUstream", self.stream))


class AsyncOp:
    """One cuFileReadAsync/WriteAsync. libcufile reads the size/offset cells when the stream runs the
    operation and writes the result cell then, so this object keeps them alive; read ``result``
    after synchronising the stream."""

    def __init__(self, fh: FileHandle, op: str, buf, size: int, file_offset: int, buf_offset: int, stream):
        L = fh.L
        self.ffi = L.ffi
        ptr, _ = device_pointer(buf)
        self._buf = buf
        self.size_p = L.ffi.new("size_t *", size)
        self.file_off_p = L.ffi.new("off_t *", file_offset)
        self.buf_off_p = L.ffi.new("off_t *", buf_offset)
        self.done_p = L.ffi.new("ssize_t *", -1)
        fn = L.lib.cuFileReadAsync if op == "read" else L.lib.cuFileWriteAsync
        self.call = "cuFileReadAsync" if op == "read" else "cuFileWriteAsync"
        check(
            self.call,
            fn(
                fh.handle,
                L.ffi.cast("void *", ptr),
                self.size_p,
                self.file_off_p,
                self.buf_off_p,
                self.done_p,
                L.ffi.cast("CUstream", _stream_ptr(stream)),
            ),
        )

    @property
    def result(self) -> int:
        """Bytes done (call after the stream is synchronised); raises on a failed operation."""
        return check_ssize(self.call, int(self.done_p[0]))


@dataclass
class IoRequest:
    handle: FileHandle
    opcode: str  # "read" | "write"
    buf: object
    size: int
    file_offset: int = 0
    buf_offset: int = 0
    cookie: int = 0


@dataclass
class IoEvent:
    cookie: int
    status: str
    ret: int


_STATUS = {1: "WAITING", 2: "PENDING", 4: "INVALID", 8: "CANCELED", 16: "COMPLETE", 32: "TIMEOUT", 64: "FAILED"}


class Batch:
    """``with Batch(64) as b: b.submit([...]); events = b.wait(64)`` — cuFileBatchIO*."""

    def __init__(self, max_requests: int, library: Library | None = None):
        self.L = library or load()
        self.max = max_requests
        self._id = self.L.ffi.new("CUfileBatchHandle_t *")
        self.live = False
        self._keep: list[tuple[object, object]] = []  # cffi objects of submitted I/Os, alive until reaped

    def __enter__(self):
        check("cuFileBatchIOSetUp", self.L.lib.cuFileBatchIOSetUp(self._id, self.max))
        self.live = True
        return self

    def __exit__(self, *exc):
        self.destroy()

    def submit(self, requests: list[IoRequest], flags: int = 0) -> None:
        ffi, lib = self.L.ffi, self.L.lib
        params = ffi.new("CUfileIOParams_t[]", len(requests))
        for i, r in enumerate(requests):
            p = params[i]
            p.mode = lib.CUFILE_BATCH
            ptr, _ = device_pointer(r.buf)
            p.u.batch.devPtr_base = ffi.cast("void *", ptr)
            p.u.batch.file_offset = r.file_offset
            p.u.batch.devPtr_offset = r.buf_offset
            p.u.batch.size = r.size
            p.fh = r.handle.handle
            p.opcode = lib.CUFILE_READ if r.opcode == "read" else lib.CUFILE_WRITE
            p.cookie = ffi.cast("void *", r.cookie)
        self._keep.append((params, requests))
        check("cuFileBatchIOSubmit", lib.cuFileBatchIOSubmit(self._id[0], len(requests), params, flags))

    def status(self, min_nr: int, max_nr: int | None = None, timeout_s: float | None = None) -> list[IoEvent]:
        ffi, lib = self.L.ffi, self.L.lib
        n = max_nr or self.max
        events = ffi.new("CUfileIOEvents_t[]", n)
        nr = ffi.new("unsigned *", n)
        ts = ffi.NULL
        if timeout_s is not None:
            ts = ffi.new("struct timespec *")
            ts.tv_sec = int(timeout_s)
            ts.tv_nsec = int((timeout_s - int(timeout_s)) * 1e9)
        check("cuFileBatchIOGetStatus", lib.cuFileBatchIOGetStatus(self._id[0], min_nr, nr, events, ts))
        out = []
        for i in range(nr[0]):
            e = events[i]
            ret = int(ffi.cast("ssize_t", e.ret))
            out.append(IoEvent(int(ffi.cast("uintptr_t", e.cookie)), _STATUS.get(int(e.status), str(e.status)), ret))
        return out

    def wait(self, count: int, timeout_s: float = 30.0) -> list[IoEvent]:
        """Collect ``count`` completions (polling GetStatus), or raise after ``timeout_s``."""
        import time

        done: list[IoEvent] = []
        deadline = time.monotonic() + timeout_s
        while len(done) < count:
            done += self.status(0, count - len(done), 0.01)
            if len(done) < count and time.monotonic() > deadline:
                raise CuFileError(
                    "cuFileBatchIOGetStatus", 5030, detail=f"{len(done)} of {count} completions after {timeout_s} s"
                )
        return done

    def cancel(self) -> None:
        check("cuFileBatchIOCancel", self.L.lib.cuFileBatchIOCancel(self._id[0]))

    def destroy(self) -> None:
        if self.live:
            self.live = False
            self.L.lib.cuFileBatchIODestroy(self._id[0])
            self._keep.clear()
