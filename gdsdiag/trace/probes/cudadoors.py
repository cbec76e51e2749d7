"""The CUDA driver's copy entry points as programs reach them: besides the exported cuMemcpy*
symbols, libcudart and libraries like kvikio get their driver functions from cuGetProcAddress,
which may hand out addresses inside libcuda that no exported symbol names. Only the driver itself
can say which: the library must be loaded and asked, and each address turned into the library's
own virtual address gives uprobe sites valid for every process mapping the same file.

Loading a library runs its code (its constructors first), and the libcuda asked may be one a traced
program opened: any user can name a file ``libcuda.so.1``. So the tracer never loads one itself.
A child process asks, started fresh (no descriptor of the tracer's but the library's, an empty
environment, the interpreter without its site packages), as the library's owner, so that no file
is run with more rights than its owner already has: the node's driver (root's, writable by no one
else, in a directory only root can change) as root, a user's copy as that user. A library that
someone other than its owner could have written is not loaded at all, and the trace says so.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import stat
import subprocess
import sys
import time

# cuGetProcAddress takes base names; the handler says which side is host memory
COPY_ENTRY_POINTS = (
    ("cuMemcpyHtoD", "memcpy_htod"),
    ("cuMemcpyHtoDAsync", "memcpy_htod"),
    ("cuMemcpyDtoH", "memcpy_dtoh"),
    ("cuMemcpyDtoHAsync", "memcpy_dtoh"),
    ("cuMemcpy", "memcpy_any"),
    ("cuMemcpyAsync", "memcpy_any"),
    ("cuMemcpy2D", "memcpy_2d"),
    ("cuMemcpy2DAsync", "memcpy_2d"),
    ("cuMemcpy2DUnaligned", "memcpy_2d"),
    ("cuMemcpy3D", "memcpy_3d"),
    ("cuMemcpy3DAsync", "memcpy_3d"),
    ("cuMemcpyBatchAsync", "memcpy_batch"),  # kvikio's POSIX path (cudaAPI::cuda_memcpy_async)
)
LEGACY_STREAM, PER_THREAD_STREAM = 1, 2  # CU_GET_PROC_ADDRESS_* flags (cuda.h)
NOBODY_WRITES = stat.S_IWGRP | stat.S_IWOTH
ASK_TIMEOUT_S = 20.0  # cuInit of a real driver: ~0.2 s on the H100, seconds on a cold node
MAX_ANSWER_BYTES = 64 << 10

# What the child runs: the standard library only (no site packages, no gdsdiag: the child may run
# as a user who cannot read the tracer's installation), the library on descriptor 3.
_CHILD = r"""
import ctypes, json, os, sys
names, fd, flags = json.loads(sys.argv[1]), int(sys.argv[2]), (1, 2)
def out(d):
    sys.stdout.write(json.dumps(d)); sys.stdout.flush(); os._exit(0)
try:
    lib = ctypes.CDLL("/proc/self/fd/%d" % fd)
except OSError as e:
    out({"why": "cannot load it: %s" % e})
if lib.cuInit(0) != 0:
    out({"why": "cuInit failed (no usable GPU here)"})
st = os.fstat(fd)
bias = None
with open("/proc/self/maps") as f:
    for line in f:
        p = line.split(None, 5)
        if len(p) == 6 and int(p[4]) == st.st_ino and int(p[2], 16) == 0:
            bias = int(p[0].split("-")[0], 16)
            break
if bias is None:
    out({"why": "the library is not mapped in the asking process"})
ver = ctypes.c_int(0)
lib.cuDriverGetVersion(ctypes.byref(ver))
get2, get1 = getattr(lib, "cuGetProcAddress_v2", None), getattr(lib, "cuGetProcAddress", None)
if get2 is None and get1 is None:
    out({"why": "this libcuda has no cuGetProcAddress"})
sites = []
for i, name in enumerate(names):
    for fl in flags:
        p = ctypes.c_void_p()
        if get2 is not None:
            get2.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p]
            r = get2(name.encode(), ctypes.byref(p), ver.value, fl, None)
        else:
            get1.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64]
            r = get1(name.encode(), ctypes.byref(p), ver.value, fl)
        if r == 0 and p.value:
            sites.append([p.value - bias, i])
out({"sites": sites})
"""


def _trusted_root_dirs(path: str) -> bool:
    """Every directory from / down to PATH's is root's and writable by no one else (or sticky, as
    /tmp): nobody but root can put another file under the name, or beside it for its $ORIGIN."""
    d = os.path.dirname(os.path.realpath(path))
    while True:
        try:
            st = os.stat(d)
        except OSError:
            return False
        if st.st_uid != 0 or (st.st_mode & NOBODY_WRITES and not st.st_mode & stat.S_ISVTX):
            return False
        if d == "/":
            return True
        d = os.path.dirname(d)


def loader_identity(st: os.stat_result, path: str) -> tuple[int, int] | str:
    """(uid, gid) to load the library as, or why it is not loaded at all."""
    if st.st_mode & NOBODY_WRITES:
        return f"{path} is writable by users other than its owner (mode {stat.S_IMODE(st.st_mode):o}): not loaded"
    if st.st_uid == 0:
        if not _trusted_root_dirs(path):
            return f"{path} lies in a directory a user other than root can change: not loaded"
        return 0, 0
    try:
        gid = pwd.getpwuid(st.st_uid).pw_gid
    except KeyError:
        gid = st.st_gid
    return st.st_uid, gid


class Asking:
    """One child asking a libcuda for its copy entry points; ``result()`` once it has answered."""

    def __init__(self, libcuda: str) -> None:
        self.libcuda = libcuda
        self.proc: subprocess.Popen | None = None
        self.why: str | None = None
        self.deadline = time.monotonic() + ASK_TIMEOUT_S
        try:
            fd = os.open(libcuda, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as e:
            self.why = f"cannot open {libcuda}: {e.strerror}"
            return
        try:
            st = os.fstat(fd)
            who = loader_identity(st, libcuda) if stat.S_ISREG(st.st_mode) else f"{libcuda} is not a regular file"
            if isinstance(who, str):
                self.why = who
                return
            self.proc = self._start(fd, *who)
        except OSError as e:
            self.why = f"cannot start the child that asks it: {e.strerror or e}"
        finally:
            os.close(fd)

    @staticmethod
    def _start(fd: int, uid: int, gid: int) -> subprocess.Popen:
        names = json.dumps([n for n, _ in COPY_ENTRY_POINTS])
        exe = _interpreter_for(uid)
        drop = os.geteuid() == 0 and uid != 0  # (root's own driver is asked as root)
        return subprocess.Popen(
            [exe, "-I", "-S", "-c", _CHILD, names, str(fd)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd="/",
            close_fds=True,
            pass_fds=(fd,),
            user=uid if drop else None,
            group=gid if drop else None,
            extra_groups=[] if drop else None,
        )

    def done(self) -> bool:
        return self.proc is None or self.proc.poll() is not None or time.monotonic() > self.deadline

    def result(self, wait: bool = False) -> tuple[dict[int, str], str | None]:
        """{virtual address in libcuda: handler} and a reason when there are none; WAIT: until the
        child answers or its time is up."""
        if self.proc is None:
            return {}, self.why
        out = self._read(wait)
        try:  # (it writes its answer, then exits: wait out that moment, never past its time)
            self.proc.wait(timeout=max(self.deadline - time.monotonic(), 0.05))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return {}, f"no answer in {ASK_TIMEOUT_S:.0f} s"
        return _parse(out)

    def _read(self, wait: bool) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        buf = b""
        fd = self.proc.stdout.fileno()
        while len(buf) < MAX_ANSWER_BYTES:
            left = self.deadline - time.monotonic() if wait else 0.0
            if not select.select([fd], [], [], max(left, 0.0))[0]:
                break
            chunk = os.read(fd, MAX_ANSWER_BYTES - len(buf))
            if not chunk:
                break
            buf += chunk
        self.proc.stdout.close()
        return buf


def _world_runnable(path: str) -> bool:
    """PATH and every directory above it can be executed and searched by any user."""
    p = path
    while True:
        try:
            if not os.stat(p).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


def _interpreter_for(uid: int) -> str:
    """A Python the asking child can run as UID: this one by its real path (a venv's link may lie
    under root's 0700 home), else the distribution's (the child needs the standard library only)."""
    exe = os.path.realpath(sys.executable)
    if uid == 0 or _world_runnable(exe):
        return exe
    for other in ("/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(other)
        if _world_runnable(real):
            return real
    return exe  # (the child then fails to start, and the trace says so)


def _parse(out: bytes) -> tuple[dict[int, str], str | None]:
    """The child's answer, checked as data from a stranger: a user's library speaks through it."""
    try:
        doc = json.loads(out)
    except ValueError:
        return {}, "the child that asked it gave no answer"
    if not isinstance(doc, dict):
        return {}, "the child that asked it gave no answer"
    if isinstance(doc.get("why"), str):
        return {}, doc["why"][:200]
    sites = doc.get("sites")
    if not isinstance(sites, list) or len(sites) > 2 * len(COPY_ENTRY_POINTS):
        return {}, "the child that asked it gave a malformed answer"
    got: dict[int, str] = {}
    for s in sites:
        if (
            not isinstance(s, list)
            or len(s) != 2
            or not all(type(v) is int for v in s)
            or not 0 < s[0] < 1 << 40
            or not 0 <= s[1] < len(COPY_ENTRY_POINTS)
        ):
            return {}, "the child that asked it gave a malformed answer"
        got[s[0]] = COPY_ENTRY_POINTS[s[1]][1]
    return got, None if got else "it handed out no copy entry point"


def proc_address_sites(libcuda: str) -> tuple[dict[int, str], str | None]:
    """{virtual address in libcuda: handler} for the copy entry points cuGetProcAddress returns,
    and a reason when none could be had (no GPU, an old driver, a library not loaded)."""
    return Asking(libcuda).result(wait=True)
