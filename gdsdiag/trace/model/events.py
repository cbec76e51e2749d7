"""Typed event records: what the probes saw, in a form the classifier, --record and --replay share."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from . import eventdefs

# ids used by probes/cufile_trace.c and nvfs_kprobes.c: generated into them from eventdefs.py
EV_API_ENTER, EV_API_EXIT, EV_USDT, EV_SYS_ENTER, EV_SYS_EXIT = 1, 2, 3, 4, 5
EV_BLK_ISSUE, EV_BLK_DONE, EV_HANDLE, EV_BATCH_REQ, EV_KPROBE = 6, 7, 8, 9, 10
EV_PROC, EV_FD, EV_PAGES, EV_MAJFLT = 11, 12, 13, 14
KINDS = {v: kind for _, v, kind in eventdefs.KINDS if kind != "sys_enter"}
# Paths that are never file data: pseudo-files, pipes and sockets; shared objects and Python sources
# (the dynamic loader and interpreters read ELF headers and sources with pread). The probes decide the
# same by path in the kernel; the reader, the classifier and the counted-I/O reader by this.
NOT_DATA_PREFIXES = ("/proc/", "/sys/", "/dev/", "/run/", "pipe:", "socket:", "anon_inode:")
CODE_SUFFIX_RE = re.compile(r"(\.so(\.\d+)*|\.py|\.pyc)$")


def not_data(path: str) -> bool:
    """Whether PATH is a pseudo-file, a library or a source: never data I/O (--path aside)."""
    return path.startswith(NOT_DATA_PREFIXES) or CODE_SUFFIX_RE.search(path) is not None


API_NAMES = eventdefs.names(eventdefs.API)
SYS_NAMES = eventdefs.names(eventdefs.SYSCALLS)
FD_NAMES = eventdefs.names(eventdefs.FD_EVENTS)
PROC_NAMES = eventdefs.names(eventdefs.PROC_EVENTS)
KPROBE_NAMES = eventdefs.names(eventdefs.KPROBE_EVENTS)
NVFS_IOCTLS = {
    0x40047401: "NVFS_IOCTL_REMOVE",
    0x40047402: "NVFS_IOCTL_READ",
    0x40047403: "NVFS_IOCTL_MAP",
    0x40047404: "NVFS_IOCTL_WRITE",
    0x40047405: "NVFS_IOCTL_SET_RDMA_REG_INFO",
    0x40047406: "NVFS_IOCTL_GET_RDMA_REG_INFO",
    0x40047407: "NVFS_IOCTL_CLEAR_RDMA_REG_INFO",
    0x40047408: "NVFS_IOCTL_BATCH_IO",
}

# 2: v-form syscalls carry the first iovec's base address (a1), not the iovec array's; opens carry
# [fd, flags, position]; fd/proc/pages events and read/write/io_uring/aio exist
# 3: opens carry [fd, flags, position, dev, ino, dirfd, serial]; read/write/readv/writev carry in a4
# the bytes moved at the file position while the kernel counted them; "counted" events (host I/O
# counted in the kernel, gdsdiag/trace/model/counted.py) close the recording; no unnamed_open events
# 4: a cuFileRead/Write's exit carries in a1..a6 the evidence its own thread gave (its pread64/pwrite64
# and cufio_px_* USDT hits, not sent as their own records): syscalls, fd, syscall id, USDT hits,
# their bytes, the probe's index in evidence.ROUTE_USDT (calls.CallMatcher._folded)
# 5: a CUDA copy carries in a6 what the probe read of its host source (content.CopySample); "content"
# events hold the live trace's comparisons of those with the files' bytes (content.py); renames,
# io_uring registrations and io_uring_rw requests with their buffer, thread exits (a gdsdiag that
# reads only up to 4 would drop them unseen: it refuses the file instead)
RECORD_VERSION = 5


@dataclass(slots=True)  # (2 M events of a replay: no per-object __dict__)
class Event:
    ts: int  # ns, CLOCK_MONOTONIC (bpf_ktime_get_ns)
    pid: int
    tid: int
    kind: str  # api_enter | api_exit | usdt | sys_exit | blk_issue | blk_done | handle | batch_req | kprobe | open | fd | proc | pages | counted | bounces (one process's bounce pairs, Classifier._feed_bounces)
    name: str  # cuFileRead, cufio_core:cufio_px_read, pread64, nvfs_get_dma …
    args: list = field(default_factory=list)
    comm: str = ""
    path: str | None = None  # file behind the fd of a syscall, resolved when it was seen

    def to_list(self) -> list:
        return [self.ts, self.pid, self.tid, self.kind, self.name, self.args, self.comm, self.path]

    @classmethod
    def from_list(cls, v: list) -> Event:
        return cls(int(v[0]), int(v[1]), int(v[2]), str(v[3]), str(v[4]), list(v[5]), str(v[6]), v[7])


class NotARecording(Exception):
    def __init__(self, line: int, why: str):
        super().__init__(why)
        self.line, self.why = line, why


class NewerRecording(Exception):
    def __init__(self, version: int):
        super().__init__(version)
        self.version = version


_INT_LO, _INT_HI = -(1 << 64), 1 << 64


def is_int(v) -> bool:
    return type(v) is int and _INT_LO < v < _INT_HI


def event_of(v, n: int):
    """An Event from one parsed line, or NotARecording naming what is wrong with it."""
    if not isinstance(v, list) or len(v) != 8:
        raise NotARecording(n, "an event is a list of 8 values")
    ts, pid, tid, kind, name, args, comm, path = v
    if not (is_int(ts) and is_int(pid) and is_int(tid)):
        raise NotARecording(n, "timestamp, pid and tid must be integers")
    if not (isinstance(kind, str) and isinstance(name, str) and isinstance(comm, str)):
        raise NotARecording(n, "kind, name and comm must be strings")
    # the probes record integer arguments only (probes/cufile_trace.c); (type() is int: no bool)
    if (
        type(args) is not list
        or len(args) > 16
        or not all(type(a) is int for a in args)
        or (args and not (_INT_LO < min(args) and max(args) < _INT_HI))
    ):
        raise NotARecording(n, "args must be a list of at most 16 integers")
    if path is not None and not isinstance(path, str):
        raise NotARecording(n, "path must be a string or null")
    # a recording repeats a few dozen names millions of times: one string object each, not one a line
    return Event(ts, pid, tid, _intern(kind), _intern(name), args, _intern(comm), path)


def _intern(s: str) -> str:
    return sys.intern(s) if len(s) <= 64 else s


def check_header(header, n: int) -> None:
    if not isinstance(header, dict) or "gdsdiag_trace_record" not in header:
        raise NotARecording(n, "no gdsdiag_trace_record header")
    version = header["gdsdiag_trace_record"]
    if not is_int(version) or version < 1:
        raise NotARecording(n, "header field gdsdiag_trace_record must be a positive integer")
    if version > RECORD_VERSION:
        # (its events mean what a newer probe program sent: read here they would give other verdicts)
        raise NewerRecording(version)
    for key in ("probes_attached", "probes_not_attached"):
        if not isinstance(header.get(key, []), list):
            raise NotARecording(n, f"header field {key} must be a list")
    if not is_int(header.get("lost", 0)):
        raise NotARecording(n, "header field lost must be an integer")


def leading_int(text: str) -> int | None:
    """The first value of an event line ("[ts, ..."), read without parsing the line's JSON."""
    end = text.find(",", 1, 40)
    if not text.startswith("[") or end < 0:
        return None
    digits = text[1:end].strip()
    return int(digits) if digits.isascii() and digits.isdigit() else None
