"""Typed event records: what the probes saw, in a form the classifier, --record and --replay share."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field

from ..errors import GdsdiagError
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
# counted in the kernel, gdsdiag/trace/counted.py) close the recording; no unnamed_open events
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


def write_record(f, header: dict, events) -> None:
    f.write(json.dumps({"gdsdiag_trace_record": RECORD_VERSION, **header}) + "\n")
    for e in events:
        f.write(json.dumps(e.to_list()) + "\n")


MAX_REPLAY_EVENTS = 2_000_000  # ~1 GiB of Event objects; a longer run is recorded in parts


class _NotARecording(Exception):
    def __init__(self, line: int, why: str):
        super().__init__(why)
        self.line, self.why = line, why


class _NewerRecording(Exception):
    def __init__(self, version: int):
        super().__init__(version)
        self.version = version


_INT_LO, _INT_HI = -(1 << 64), 1 << 64


def _is_int(v) -> bool:
    return type(v) is int and _INT_LO < v < _INT_HI


def _event(v, n: int):
    """An Event from one parsed line, or _NotARecording naming what is wrong with it."""
    if not isinstance(v, list) or len(v) != 8:
        raise _NotARecording(n, "an event is a list of 8 values")
    ts, pid, tid, kind, name, args, comm, path = v
    if not (_is_int(ts) and _is_int(pid) and _is_int(tid)):
        raise _NotARecording(n, "timestamp, pid and tid must be integers")
    if not (isinstance(kind, str) and isinstance(name, str) and isinstance(comm, str)):
        raise _NotARecording(n, "kind, name and comm must be strings")
    # the probes record integer arguments only (probes/cufile_trace.c); (type() is int: no bool)
    if (
        type(args) is not list
        or len(args) > 16
        or not all(type(a) is int for a in args)
        or (args and not (_INT_LO < min(args) and max(args) < _INT_HI))
    ):
        raise _NotARecording(n, "args must be a list of at most 16 integers")
    if path is not None and not isinstance(path, str):
        raise _NotARecording(n, "path must be a string or null")
    # a recording repeats a few dozen names millions of times: one string object each, not one a line
    return Event(ts, pid, tid, _intern(kind), _intern(name), args, _intern(comm), path)


def _intern(s: str) -> str:
    return sys.intern(s) if len(s) <= 64 else s


def read_record(path: str) -> tuple[dict, list[Event]]:
    """(header, events) of a --record file (plain or .gz), all in memory (see Recording)."""
    rec = Recording(path)
    return rec.header, list(rec.events())


class Recording:
    """A --record file (plain or .gz), read as a bounded stream, twice: ``Recording(path)`` reads it
    once without keeping it — the header, the number of events, how far out of time order an event
    comes (``disorder_ns``) — and ``events()`` streams the validated events on the second read.
    Refuses FIFOs and devices, lines over 64 KiB, more than MAX_REPLAY_EVENTS events, a damaged gzip
    stream, invalid UTF-8, JSON nested deeper than 64 or numbers out of range, and values of the
    wrong type — each as "not a gdsdiag recording: line N" instead of an internal error or a
    MemoryError. What the first read finds (everything but an event's JSON and types) is refused
    before any event is handed out."""

    FIX = "record one with gdsdiag trace --record FILE"

    def __init__(self, path: str):
        self.path = path
        self.header: dict = {}
        self.count = 0  # events (less a cut last line, once events() has found it unparsable)
        self.disorder_ns = 0  # the most an event's time lies before an earlier line's
        # --record ends every line with a newline: a last line without one was cut as it was written
        # (the tracer killed, the disk full). If it does not parse it is left out, and named here.
        self.unterminated: int | None = None
        self.cut_at: int | None = None
        self.content_lines = 0  # lines of content checks (content.py): read before any event is fed
        newest = None
        for n, text in self._lines():
            if n == 0:
                continue
            if '"content"' in text:
                self.content_lines += 1
            self.count += 1
            if self.count > MAX_REPLAY_EVENTS:
                raise self._error(n, f"more than {MAX_REPLAY_EVENTS} events")
            ts = _leading_int(text)
            if ts is None:
                continue  # (not an event: the second read names the line)
            if newest is None or ts > newest:
                newest = ts
            elif newest - ts > self.disorder_ns:
                self.disorder_ns = newest - ts

    def events(self):
        """The events in file order, each validated (the second read of the file)."""
        from ..bounded import loads_json

        count = 0
        for n, text in self._lines():
            if n == 0:
                continue
            try:
                # (the C parser: a line is at most 64 KiB, so its numbers and nesting are bounded by
                # Python's own limits, and _event rejects every non-integer; a line it refuses is
                # parsed again with gdsdiag's limits for the reason)
                v = json.loads(text)
            except (ValueError, RecursionError):
                if n == self.unterminated:
                    self.cut_at = n  # (the last line, cut as it was written: left out, and said)
                    self.count -= 1
                    return
                try:
                    v = loads_json(text)
                except ValueError as e:
                    raise self._error(n, f"not an event record ({e})") from None
            try:
                event = _event(v, n)
            except _NotARecording as bad:
                try:  # (a number out of gdsdiag's limits is the better reason, as before the fast path)
                    loads_json(text)
                except ValueError as limit:
                    raise self._error(n, f"not an event record ({limit})") from None
                raise self._error(bad.line, bad.why) from None
            yield event
            count += 1
            if count > self.count:
                raise self._error(n, "the file grew while it was replayed")

    def content_events(self):
        """The recording's content checks (a third read, only of recordings that have them)."""
        return (e for e in self.events() if e.kind == "content")

    def _error(self, line: int, why: str) -> GdsdiagError:
        return GdsdiagError(f"{self.path} is not a gdsdiag trace record: line {line}: {why}", self.FIX)

    def _lines(self):
        """(line number, text) of every event line; (0, "") once the header is read (into
        self.header). Byte-level bounds, the gzip stream and UTF-8 are checked here."""
        import gzip
        import zlib

        from ..bounded import MAX_RECORD_LINE, MAX_RECORDING, loads_json, open_user_file

        raw = open_user_file(self.path, "trace recording", MAX_RECORDING, self.FIX)
        n = 0
        try:
            with raw:
                magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
                f = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
                header = None
                total = 0
                while True:
                    try:
                        line = f.readline(MAX_RECORD_LINE + 1)
                    except EOFError:
                        if header is None:
                            raise
                        # a gzip stream that ends early (the tracer killed, the disk full): what came
                        # before the cut is read, and the cut said, as for a plain file's cut last line
                        self.cut_at = n + 1
                        break
                    if not line:
                        break
                    n += 1
                    total += len(line)
                    if len(line) > MAX_RECORD_LINE:
                        raise _NotARecording(n, f"line longer than {MAX_RECORD_LINE >> 10} KiB")
                    if not line.endswith(b"\n"):
                        self.unterminated = n  # (readline returns a line without one only at the end)
                    if total > MAX_RECORDING:
                        raise _NotARecording(n, f"more than {MAX_RECORDING >> 30} GiB of events")
                    try:
                        text = line.decode("utf-8").strip()
                    except UnicodeDecodeError:
                        raise _NotARecording(n, "invalid UTF-8") from None
                    if header is None:
                        try:
                            header = loads_json(text)
                        except ValueError:
                            header = None
                        _check_header(header, n)
                        self.header = header if isinstance(header, dict) else {}  # (checked: a dict)
                        yield 0, ""
                        continue
                    if not text or text.startswith("#"):
                        continue
                    yield n, text
                if header is None:
                    raise _NotARecording(max(n, 1), "empty file")
        except _NotARecording as e:
            raise self._error(e.line, e.why) from None
        except _NewerRecording as e:
            raise GdsdiagError(
                f"{self.path} was recorded by a newer gdsdiag (record version {e.version}; this one reads "
                f"versions 1 to {RECORD_VERSION})",
                "replay it with the gdsdiag that recorded it, or a newer one",
            ) from None
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise self._error(n + 1, f"damaged gzip stream ({e})") from None
        except OSError as e:
            raise GdsdiagError(f"cannot read {self.path}: {e.strerror or e}", "check the path") from None


def _check_header(header, n: int) -> None:
    if not isinstance(header, dict) or "gdsdiag_trace_record" not in header:
        raise _NotARecording(n, "no gdsdiag_trace_record header")
    version = header["gdsdiag_trace_record"]
    if not _is_int(version) or version < 1:
        raise _NotARecording(n, "header field gdsdiag_trace_record must be a positive integer")
    if version > RECORD_VERSION:
        # (its events mean what a newer probe program sent: read here they would give other verdicts)
        raise _NewerRecording(version)
    for key in ("probes_attached", "probes_not_attached"):
        if not isinstance(header.get(key, []), list):
            raise _NotARecording(n, f"header field {key} must be a list")
    if not _is_int(header.get("lost", 0)):
        raise _NotARecording(n, "header field lost must be an integer")


def _leading_int(text: str) -> int | None:
    """The first value of an event line ("[ts, ..."), read without parsing the line's JSON."""
    end = text.find(",", 1, 40)
    if not text.startswith("[") or end < 0:
        return None
    digits = text[1:end].strip()
    return int(digits) if digits.isascii() and digits.isdigit() else None
