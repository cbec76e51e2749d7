"""The classifier's view of the traced processes: their tree, their descriptors (open file
descriptions, cuFile handles, io_uring registered tables), the renames of their files, and what
they said and called of libcufile. Fed by classify.Classifier (the dispatcher) from the event stream;
read by the call matcher (calls.py), the host-I/O verdicts (hostio.py) and the books (accounts.py).
Pure: no I/O, and it asks none of them anything."""

from __future__ import annotations

import re
from collections import deque

from . import eventdefs
from .events import Event, not_data
from .records import MAX_FILES, Desc
from .said import LINE_MAX, LINES_PER_PROCESS
from .why import FALLBACK_WORDS

_PROC_FD_RE = re.compile(r"^/proc/(self|thread-self|\d+)/fd/(\d+)$")
CUDA_LIBS = ("libcuda.so", "libcudart.so", "libcufile.so")
O_APPEND, O_CLOEXEC, O_TMPFILE, O_DIRECT = (
    0o2000,
    0o2000000,
    0o20000000,
    0o40000,
)  # (O_TMPFILE: __O_TMPFILE, without O_DIRECTORY)
AT_SYMLINK_FOLLOW, AT_EMPTY_PATH, RENAME_EXCHANGE = 0x400, 0x1000, 2
RENAME_KEEP_NS = 120_000_000_000  # renames kept for the names of verdicts still to come (held 35 s at most)
RENAMES_KEPT = 512  # at most (each verdict of an I/O before the last rename walks them)
TMPFILE_NAME = "(unnamed O_TMPFILE"  # an O_TMPFILE's name until a linkat names it: "DIR/(unnamed O_TMPFILE, fd N)"
URING_READ_OPS, URING_WRITE_OPS = (
    {1, 4, 22},
    {2, 5, 23},
)  # IORING_OP_READV, READ_FIXED, READ / WRITEV, WRITE_FIXED, WRITE
AIO_READ_OPS, AIO_WRITE_OPS = {0, 7}, {1, 8}  # IOCB_CMD_PREAD, PREADV / PWRITE, PWRITEV
# io_uring_register opcodes (uapi io_uring.h): the registrations that start a table (FILES, FILES2,
# BUFFERS, BUFFERS2), that change entries of one (FILES_UPDATE(2), BUFFERS_UPDATE), of files
URING_REG_NEW, URING_REG_UPDATE, URING_REG_FILES = {0, 2, 13, 15}, {6, 14, 16}, {2, 3, 6, 13, 14}
URING_FILE_SKIP = -2  # IORING_REGISTER_FILES_SKIP: an update leaves that entry as it is
URING_REG_MAX_BUFS = dict(eventdefs.CONSTANTS)["URING_REG_RECORDS"]  # the probe sends these many
URING_REG_MAX_FILES = 6 * URING_REG_MAX_BUFS

# A host I/O a syscall made, as the descriptor table resolves it: (api, op, path, offset, size, ret,
# buffer, latency, note); path None: a positioned I/O on a descriptor the trace does not know
# (libcufile's own may predate the trace: still evidence for its calls)
SysIo = tuple[str, str, "str | None", int, int, int | None, "int | None", "int | None", str]


def moved(path: str, old: str, new: str) -> str | None:
    """PATH once OLD is renamed NEW (PATH is OLD, or under it when OLD is a directory); None when the
    rename does not touch it."""
    if path == old:
        return new
    if path.startswith(old) and path[len(old) : len(old) + 1] == "/":
        return new + path[len(old) :]
    return None


def _cufile_error(rc: int) -> str:
    """A cuFile status code's name (cufile.h, CU_FILE_*), or its number."""
    from ...cufile.errors import OP_ERRORS

    name = OP_ERRORS.get(rc)
    return f"{rc} {name[0]}" if name else str(rc)


class ProcState:
    """Processes and their descriptors, as the stream has them so far."""

    def __init__(self, path_filter: str | None = None, record_version: int = 2):
        self.path_filter = path_filter.rstrip("/") + "/" if path_filter else None
        self.v1 = record_version < 2  # v-form syscalls carry the iovec array, not the buffer
        self.handles: dict[tuple[int, int], tuple[int, str | None]] = {}  # (pid, handle) -> (fd, path)
        self.fds: dict[tuple[int, int], Desc] = {}  # (pid, fd) -> open file description
        self.cloexec: set[tuple[int, int]] = set()
        self.inodes: dict[tuple[int, int], str] = {}  # (kernel dev, ino) -> path
        self.procs: dict[int, dict] = {}  # pid -> ppid, comm, exe, ios
        self.data_paths: dict[str, bool] = {}  # path -> is_data_path(path)
        self._jobs: dict[int, int] = {}  # pid -> job_of(pid), while procs and their parents stay as they are
        # (time, old path, new path) of the renames of the last RENAME_KEEP_NS: a verdict decided after
        # a rename, of an I/O before it, takes the file's new name (final_name)
        self.renames: deque[tuple[int, str, str]] = deque(maxlen=RENAMES_KEPT)
        # (pid, ring fd) -> io_uring registered tables: "files" {index: (Desc, fd)}, "bufs" {index:
        # (base, length)}, and the tables' sizes when larger than the probe sends (uring_register)
        self.uring: dict[tuple[int, int], dict] = {}
        self.cgroup_job = False  # --cgroup: the whole cgroup is one job
        # processes that opened a CUDA library (or were forked from one, or adopted with --pid): only
        # their file bytes can be another process's staged copy (a cp or tar in the same tree cannot)
        self.cuda_procs: set[int] = set()
        self.wrote_data: set[int] = set()  # processes that wrote data files (copy and archive tools)
        # libcufile in use, per process: the cuFile calls other than I/O it made (cuFileDriverOpen's
        # return code, or None until it returned), the processes that made cuFile I/O calls, and those
        # the live trace saw map libcufile (set at the end, from the probes' libraries): a loader that
        # loads libcufile and then moves its bytes another way (its own non-GDS fallback) is named so
        self.cufile_calls: dict[int, dict[str, int | None]] = {}
        self.cufile_io_pids: set[int] = set()
        self.libcufile_pids: set[int] = set()
        # what each process said on stderr about its data path (trace/said.py: the lines the probes
        # sent that name it), for the why of its files: a loader's own "falling back to …"
        self.said: dict[int, list[str]] = {}
        # opens of each path (data files only are looked up): [with O_DIRECT, all] (mechanism.describe)
        self.opens_of: dict[str, list[int]] = {}

    # -- processes ---------------------------------------------------------------------------------
    def proc(self, pid: int, comm: str = "") -> dict:
        p = self.procs.get(pid)
        if p is None:
            p = self.procs[pid] = {"pid": pid, "ppid": None, "comm": comm, "exe": None, "ios": 0}
            self._jobs.clear()  # (a new process can be the traced parent another one's job walks to)
        elif comm and not p["comm"]:
            p["comm"] = comm
        return p

    def job_of(self, pid: int) -> int:
        """The traced tree a process belongs to: its topmost traced ancestor (the cgroup, for --cgroup)."""
        if self.cgroup_job:
            return 0
        job = self._jobs.get(pid)
        if job is not None:
            return job
        first = pid
        seen = 0
        p = self.procs.get(pid)
        while p is not None and p.get("ppid") in self.procs and seen < 64:
            pid = p["ppid"]
            p = self.procs.get(pid)
            seen += 1
        self._jobs[first] = pid  # (cleared whenever a process or a parent link is added)
        return pid

    def thread_forked(self, pid: int) -> None:
        """A thread (bpf._is_thread): one task more of its process, not a process (its events come
        with the process's pid); counted under it (the summary's processes say "threads")."""
        p = self.proc(pid)
        p["threads"] = p.get("threads", 0) + 1

    def forked(self, parent: int, child: int, comm: str) -> None:
        """The child starts with the parent's descriptors, sharing their file descriptions, and its
        rings, with their registrations."""
        for (pid, fd), d in list(self.fds.items()):
            if pid == parent:
                self.fds[(child, fd)] = d
                if (pid, fd) in self.cloexec:
                    self.cloexec.add((child, fd))
        p = self.proc(child, comm)
        p["ppid"] = parent
        self._jobs.clear()
        if parent in self.cuda_procs:
            self.cuda_procs.add(child)
        for (pid, ring), t in list(self.uring.items()):
            if pid == parent:
                self.uring[(child, ring)] = {k: v.copy() if isinstance(v, dict) else v for k, v in t.items()}

    def execed(self, pid: int, comm: str, exe: str | None) -> None:
        p = self.proc(pid)
        p["comm"], p["exe"] = comm or p["comm"], exe
        for fdkey in [k for k in self.cloexec if k[0] == pid]:
            self.fds.pop(fdkey, None)
            self.cloexec.discard(fdkey)
        self.cuda_procs.discard(pid)  # a new program opens its libraries again

    def adopted(self, pid: int, comm: str, ppid: int | None, exe: str | None) -> None:
        self.cuda_procs.add(pid)  # (its libraries were mapped before the trace: not known)
        p = self.proc(pid, comm)
        p["ppid"] = ppid
        self._jobs.clear()
        p["exe"] = exe

    def thread_ended(self, pid: int, tid: int) -> None:
        """Thread TID of PID ended (the kernel says so: probes/cufile_trace.c sched_process_exit). If
        its fork was taken for a process's (it ended before the reader looked in /proc), it is one
        thread more of PID instead. Events never carry a thread's id as their pid: nothing else
        was counted under it."""
        p = self.procs.get(tid)
        if p is None or p.get("ppid") != pid or p.get("exe") or p["ios"]:
            return
        del self.procs[tid]
        self._jobs.clear()
        for key in [k for k in self.fds if k[0] == tid]:  # (the fork gave it its parent's descriptors)
            self.fds.pop(key, None)
            self.cloexec.discard(key)
        parent = self.proc(pid)
        parent["threads"] = parent.get("threads", 0) + 1

    def on_said(self, e: Event) -> None:
        lines = self.said.setdefault(e.pid, [])
        if e.path and len(lines) < LINES_PER_PROCESS:
            lines.append(e.path[:LINE_MAX])

    def program_said(self, pids) -> list[tuple[str, str]]:
        """(who, line) of what the processes PIDS said about their data path, the lines that say they
        fell back first (a loader's own reason), then in the order said."""
        out = [
            (f"{self.proc(pid)['comm'] or '?'}/{pid}", line) for pid in sorted(pids) for line in self.said.get(pid, ())
        ]
        return sorted(out, key=lambda x: not FALLBACK_WORDS.search(x[1]))

    def cufile_unused(self, pids) -> str | None:
        """'libcufile loaded, no cuFile I/O' for the file's processes that loaded libcufile (mapped
        it, or called it to open the driver or ask its version) and never read or wrote through it:
        a loader's own non-GDS fallback (it tried GDS, or only linked it, and moved the bytes itself)."""
        for pid in sorted(pids):
            if pid in self.cufile_io_pids:
                continue
            calls = self.cufile_calls.get(pid)
            if not calls and pid not in self.libcufile_pids:
                continue
            who = f"{self.proc(pid)['comm'] or '?'}/{pid}"
            text = f"libcufile loaded, no cuFile I/O: {who} loaded libcufile"
            if calls:
                rc = calls.get("cuFileDriverOpen")
                if "cuFileDriverOpen" in calls:
                    text += (
                        ", opened the driver"
                        if rc == 0
                        else f", its cuFileDriverOpen failed ({_cufile_error(rc)})"
                        if rc is not None
                        else ", called cuFileDriverOpen"
                    )
                others = sorted(k for k in calls if k != "cuFileDriverOpen")
                if others:
                    text += " and called " + ", ".join(others)
            return text + ", and read these bytes itself (the program's own non-GDS path, not cuFile)"
        return None

    # -- which paths are data --------------------------------------------------------------------------
    def path_ok(self, path: str | None) -> bool:
        if self.path_filter is None:
            return True
        return path is not None and path != "" and (path.rstrip("/") + "/").startswith(self.path_filter)

    def is_data(self, path: str) -> bool:
        return not not_data(path) and self.path_ok(path)

    def is_data_path(self, path: str) -> bool:
        """Not a pseudo-file, library or source (events.not_data) and under --path:
        asked per I/O of a few files, so answered once per path (bounded, like dataflow.staged_ok)."""
        ok = self.data_paths.get(path)
        if ok is None:
            if len(self.data_paths) > 65536:
                self.data_paths.clear()
            ok = self.data_paths[path] = not not_data(path) and self.path_ok(path)
        return ok

    # -- descriptors -------------------------------------------------------------------------------------
    def on_open(self, e: Event) -> None:
        if not e.args:
            return
        fd = e.args[0]
        key = (e.pid, fd)
        self.cloexec.discard(key)
        if not e.path:
            self.fds.pop(key, None)
            return
        if e.path.rsplit("/", 1)[-1].startswith(CUDA_LIBS):
            self.cuda_procs.add(e.pid)
        flags = e.args[1] if len(e.args) > 1 else 0
        pos = e.args[2] if len(e.args) > 2 else 0
        if not e.path.startswith("/") and len(e.args) > 5 and e.args[5] >= 0:
            base = self.fds.get((e.pid, e.args[5]))  # openat relative to a directory fd
            e.path = (base.path.rstrip("/") + "/" + e.path) if base else e.path
        m = _PROC_FD_RE.match(e.path)
        if m:
            # /proc/self/fd/N (or /proc/PID/fd/N) opens the file fd N has open (the sweep re-opens its
            # data file this way to drop O_NOFOLLOW for libcufile; fio and kvikio are handed it so):
            # the new descriptor names that file, not /proc
            owner = e.pid if m.group(1) in ("self", "thread-self") else int(m.group(1))
            src = self.fds.get((owner, int(m.group(2))))
            if src is not None:
                e.path = src.path
        if flags & O_TMPFILE == O_TMPFILE:
            # an unnamed file in that directory, until a linkat names it (renamed): one name per open
            e.path = f"{e.path.rstrip('/')}/{TMPFILE_NAME}, fd {fd})"
        self.fds[key] = Desc(e.path, pos, bool(flags & O_APPEND))
        n = self.opens_of.get(e.path)
        if n is None and len(self.opens_of) < MAX_FILES:
            n = self.opens_of[e.path] = [0, 0]
        if n is not None:
            n[0] += bool(flags & O_DIRECT)
            n[1] += 1
        if flags & O_CLOEXEC:
            self.cloexec.add(key)
        if len(e.args) > 4 and e.args[4]:
            self.inodes[(e.args[3], e.args[4])] = e.path

    def on_fd(self, e: Event, a: list) -> None:
        """close, dup, lseek of a descriptor (A: the event's args, padded); mmap is the dispatcher's
        (the data-flow model's mappings)."""
        key = (e.pid, a[0])
        if e.name in ("close", "unnamed_open"):
            self.fds.pop(key, None)
            self.cloexec.discard(key)
        elif e.name == "dup":
            new = (e.pid, a[1])
            d = self.fds.get(key)
            self.cloexec.discard(new)
            if d is None:
                self.fds.pop(new, None)
            else:
                self.fds[new] = d
                if a[2]:
                    self.cloexec.add(new)
        elif e.name == "lseek":
            d = self.fds.get(key)
            if d is not None:
                d.pos = a[1]

    def on_handle(self, e: Event) -> None:
        if e.name == "cuFileHandleRegister" and len(e.args) > 1:
            # the traced descriptor table first; else the path the reader looked up for this fd when
            # the event arrived (an fd opened before the trace, or whose open event was lost)
            d = self.fds.get((e.pid, e.args[1]))
            if d is not None:
                e.path = d.path
        if e.name == "cuFileHandleRegister" and len(e.args) >= 3 and e.args[2] == 0:
            self.handles[(e.pid, e.args[0])] = (e.args[1], e.path)
        elif e.name == "cuFileHandleDeregister":
            self.handles.pop((e.pid, e.args[0]), None)

    def handle_path(self, pid: int, handle: int) -> str | None:
        return self.handles.get((pid, handle), (None, None))[1]

    def desc(self, e: Event, fd: int) -> Desc | None:
        d = self.fds.get((e.pid, fd))
        if d is None and e.path and fd >= 0:  # a version-1 record: the path came with the event
            d = self.fds[(e.pid, fd)] = Desc(e.path)
        return d

    # -- renames -----------------------------------------------------------------------------------------
    def rename_names(self, e: Event) -> tuple[str, str] | None:
        """(old, new) of rename/renameat/renameat2 (path "OLD\\0NEW", args [old dfd, new dfd, flags]),
        or of a linkat of a descriptor (AT_EMPTY_PATH, or /proc/self/fd/N with AT_SYMLINK_FOLLOW: an
        O_TMPFILE given its name), both absolute; None: not a rename (a plain hard link leaves the
        old name in place)."""
        old, _, new = (e.path or "").partition("\0")
        a = e.args + [-100, -100, 0]
        new = self._joined(e.pid, new, a[1])
        if e.name == "linkat":
            d = self._linked(e.pid, old, a[0], a[2])
            if d is None:
                return None
            old = d.path
        else:
            old = self._joined(e.pid, old, a[0])
        if not old.startswith("/") or not new.startswith("/") or old == new:
            return None
        return old, new

    @staticmethod
    def is_exchange(e: Event) -> bool:
        return e.name == "renameat2" and (e.args + [-100, -100, 0])[2] & RENAME_EXCHANGE != 0

    def _joined(self, pid: int, path: str, dfd: int) -> str:
        """PATH relative to directory fd DFD, where the reader left it relative (it could not read
        /proc/PID/fd/DFD) and the traced table names that directory."""
        if path.startswith("/") or dfd < 0:
            return path
        base = self.fds.get((pid, dfd))
        return base.path.rstrip("/") + "/" + path if base else path

    def _linked(self, pid: int, old: str, dfd: int, flags: int) -> Desc | None:
        """The unnamed O_TMPFILE a linkat names (AT_EMPTY_PATH: descriptor DFD; /proc/self/fd/N
        followed), or None: a link of a path, or of a file that has a name, is a second name (a hard
        link), and the first stays."""
        d = None
        if not old and flags & AT_EMPTY_PATH:
            d = self.fds.get((pid, dfd))
        m = _PROC_FD_RE.match(old)
        if m and flags & AT_SYMLINK_FOLLOW:
            owner = pid if m.group(1) in ("self", "thread-self") else int(m.group(1))
            d = self.fds.get((owner, int(m.group(2))))
        return d if d is not None and TMPFILE_NAME in d.path else None

    def note_rename(self, old: str, new: str, ts: int) -> None:
        """OLD is NEW from TS on, for the verdicts still to come of I/O before it (final_name)."""
        q = self.renames
        q.append((ts, old, new))
        while q and q[0][0] < ts - RENAME_KEEP_NS:
            q.popleft()

    def rename_work(self) -> int:
        """What a rename walks here: every descriptor, handle and inode."""
        return len(self.fds) + len(self.handles) + len(self.inodes)

    def rename_paths(self, old: str, new: str) -> None:
        """OLD (a file, or a directory: every path under it) is NEW in the descriptors open on it, the
        registered io_uring files, the handles and the inodes."""
        registered = [d for t in self.uring.values() for d, _ in t["files"].values()]
        for d in {id(d): d for d in (*self.fds.values(), *registered)}.values():
            to = moved(d.path, old, new)
            if to is not None:
                d.path = to
        for key, (fd, path) in list(self.handles.items()):
            to = moved(path, old, new) if path else None
            if to is not None:
                self.handles[key] = (fd, to)
        for key, path in list(self.inodes.items()):
            to = moved(path, old, new)
            if to is not None:
                self.inodes[key] = to

    def final_name(self, path: str, ts: int) -> str:
        """The name of the file PATH named at TS, after the renames since."""
        if self.renames[-1][0] <= ts:
            return path  # (most verdicts: of an I/O after the last rename, such as a start-up's .pyc writes)
        for t, old, new in self.renames:
            if t > ts:
                to = moved(path, old, new)
                if to is not None:
                    path = to
        return path

    # -- syscalls other than read/write: AIO, io_uring, in-kernel copies ---------------------------
    def other_ios(self, e: Event, a: list, ret: int) -> list[SysIo]:
        """The file I/O of an aio, io_uring or in-kernel copy record (A: its 7 args), as the
        descriptor table resolves it; an io_uring_register changes the ring's tables and moves none."""
        name = e.name
        if name == "aio":
            op = "read" if a[4] in AIO_READ_OPS else "write" if a[4] in AIO_WRITE_OPS else None
            d = self.desc(e, a[0])
            if op is None or d is None:
                return []
            buf = a[1] if a[4] in (0, 1) else None
            note = "Linux AIO request (completion not traced: size is the request's)"
            return [("aio", op, d.path, a[3], a[2], None, buf, None, note)]
        if name in ("io_uring_rw", "io_uring"):
            io = self._uring_rw(e, a, ret)
            return [io] if io is not None else []
        if name == "io_uring_register":
            self._uring_register(e.pid, a)
            return []
        out: list[SysIo] = []
        if name in ("copy_file_range", "sendfile", "splice"):
            # both sides stay in the kernel: a file read and/or written, never a GPU
            for fd, offi, op in ((a[0], 3, "read"), (a[1], 4, "write")):
                d = self.desc(e, fd)
                if d is None:
                    continue
                off = a[offi]
                if off == -1 or (name == "sendfile" and op == "write"):
                    off = d.pos
                    if ret > 0:
                        d.pos += ret
                note = f"{name} fd {a[0]} -> fd {a[1]}: an in-kernel copy, no user buffer"
                out.append((name, op, d.path, off, max(ret, 0), ret, None, a[6], note))
        return out

    def _uring_rw(self, e: Event, a: list, ret: int) -> SysIo | None:
        """One io_uring read or write. io_uring_rw (probes/cufile_trace.c uring_t): a1 the buffer
        address (0: not known), a2 the opcode | (ring fd + 1) << 32; io_uring, the older record: a1
        user_data, a2 the opcode. A fixed-file request (IOSQE_FIXED_FILE) names an index into the
        ring's registered files (_uring_register), a READ_FIXED/WRITE_FIXED buffer lies in one of
        its registered buffers."""
        opcode = a[2] & 0xFF
        op = "read" if opcode in URING_READ_OPS else "write" if opcode in URING_WRITE_OPS else None
        if op is None:
            return None
        rw = e.name == "io_uring_rw"
        ring = (a[2] >> 32) - 1 if rw else -1
        buf = (a[1] or None) if rw else None
        fixed_buf = opcode in (4, 5)  # READ_FIXED, WRITE_FIXED
        tables = self._uring_tables(e.pid, ring) if a[4] & 1 or fixed_buf else None
        if a[4] & 1:  # IOSQE_FIXED_FILE: a registered-file index, not an fd
            d, note = self._fixed_file(tables, a[0])
        else:
            d = self.desc(e, a[0])
            note = "" if buf else "io_uring request (buffer address not traced)"
        if fixed_buf:
            note = ", ".join(filter(None, (note, self._fixed_buffer(tables, buf))))
        off = a[3]
        if d is None:
            if not (a[4] & 1):
                return None
            path = f"<io_uring fixed file {a[0]}>"
        else:
            path = d.path
            if off == -1:
                off = d.pos
                if ret > 0:
                    d.pos += ret
        return ("io_uring", op, path, off, max(ret, 0), ret, buf, a[6], note)

    def _uring_tables(self, pid: int, ring: int) -> dict | None:
        """The registered tables of PID's ring RING; with RING not known (-1: an SQPOLL thread
        submitted it) or registered under another number (a registered ring's index), the process's
        only ring with tables."""
        t = self.uring.get((pid, ring))
        if t is None:
            mine = [v for (p, _), v in self.uring.items() if p == pid]
            t = mine[0] if len(mine) == 1 else None
        return t

    @staticmethod
    def _fixed_file(tables: dict | None, index: int) -> tuple[Desc | None, str]:
        """The open file at INDEX of a ring's registered files, and the evidence that says so."""
        files = tables["files"] if tables else {}
        hit = files.get(index)
        if hit is not None:
            return hit[0], f"io_uring request on registered file #{index} (fd {hit[1]} when registered)"
        size = tables.get("files_n", 0) if tables else 0
        if size > len(files) and index >= URING_REG_MAX_FILES:
            why = f"the ring registered {size} files, the first {URING_REG_MAX_FILES} are traced"
        elif tables is None:
            why = "no registration of the ring's files was traced"
        else:
            why = "not a data file the trace named when it was registered"
        return None, f"io_uring request on registered file #{index} (its path is not known: {why})"

    @staticmethod
    def _fixed_buffer(tables: dict | None, buf: int | None) -> str:
        """Evidence of a READ_FIXED/WRITE_FIXED address: which registered buffer holds it."""
        if not buf:
            return ""
        bufs = (tables or {}).get("bufs", {})
        for i, (base, n) in sorted(bufs.items()):
            if base <= buf < base + n:
                return f"in registered buffer #{i} ({base:#x}, {n} bytes)"
        size = (tables or {}).get("bufs_n", 0)
        more = (
            f" (the ring registered {size} buffers, the first {URING_REG_MAX_BUFS} are traced)"
            if size > len(bufs)
            else ""
        )
        return "in no registered buffer the trace saw" + more

    def _uring_register(self, pid: int, a: list) -> None:
        """One record of an io_uring_register (probes/cufile_trace.c uring_register_exit): a0 the
        ring's fd, a1 the opcode | entries here << 8, a2 the table index of the first, a3 the call's
        entries, a4..a6 six s32 descriptors or one buffer (base, length). A descriptor is resolved
        now: a ring keeps its file after the program closes the fd."""
        op, k, first, total = a[1] & 0xFF, (a[1] >> 8) & 0xFF, a[2], a[3]
        key = (pid, a[0])
        t = self.uring.get(key)
        if t is None:
            t = self.uring[key] = {"files": {}, "bufs": {}}
        files = op in URING_REG_FILES
        table = t["files"] if files else t["bufs"]
        if op in URING_REG_NEW and first == 0:  # (a register's first record: the table starts anew)
            table.clear()
            t["files_n" if files else "bufs_n"] = total
        if op not in URING_REG_NEW and op not in URING_REG_UPDATE:  # UNREGISTER_BUFFERS, UNREGISTER_FILES
            table.clear()
            return
        if files:
            words = [v & 0xFFFFFFFFFFFFFFFF for v in a[4:7]]
            fds = [x for w in words for x in (w & 0xFFFFFFFF, w >> 32)]
            for i in range(k):
                fd = fds[i] - (1 << 32) if fds[i] >= 1 << 31 else fds[i]
                if fd == URING_FILE_SKIP:
                    continue
                d = self.fds.get((pid, fd)) if fd >= 0 else None
                if d is None:
                    table.pop(first + i, None)
                else:
                    table[first + i] = (d, fd)  # (the open file itself: its position, its renames)
        elif k:
            base, n = a[4], a[5]
            if base and n > 0:
                table[first] = (base, n)
            else:
                table.pop(first, None)
