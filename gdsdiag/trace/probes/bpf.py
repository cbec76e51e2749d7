"""Load and attach the trace probes with bcc, choosing at run time by what exists (like bcc's
tools do): USDT probes of this libcufile, uprobes on its API, CUDA copies in libcuda, syscall and
block tracepoints, and the nvidia-fs / P2PDMA kernel probes where kprobes and the symbols exist."""

from __future__ import annotations

import bisect
import ctypes.util
import glob
import operator
import os
import struct
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from ...errors import GdsdiagError
from ..model import evidence
from ..model.eventdefs import API as API_IDS
from ..model.eventdefs import (
    EVENT_SIZE,
    EVENT_STRUCT,
    FD_KINDS,
    OPEN_FIELDS,
    OPEN_KINDS,
    OPEN_STRUCT,
    RENAMES,
    c_defines,
)
from ..model.eventdefs import KINDS as EVENT_KINDS
from ..model.eventdefs import SYSCALLS as SYSCALL_IDS
from ..model.events import API_NAMES, FD_NAMES, KINDS, KPROBE_NAMES, PROC_NAMES, SYS_NAMES, Event, not_data
from ..model.said import StderrLines
from ..model.tally import Unclassified, count_unclassified
from .headers import fix_command, has_tree
from .stdoutguard import stdout_to_stderr

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .wholecalls import WholeCalls

# USDT probes that name the route, and the arguments read of them: evidence.py, the one table of
# which probe yields which evidence (the index in ROUTE_USDT is the id the probe program reports).
ROUTE_USDT = evidence.ROUTE_USDT
API_UPROBES = [  # symbol, entry handler, return handler
    ("cuFileRead", "api_read_enter", "api_read_exit"),
    ("cuFileWrite", "api_write_enter", "api_write_exit"),
    ("cuFileReadAsync", "api_read_async_enter", "api_read_async_exit"),
    ("cuFileWriteAsync", "api_write_async_enter", "api_write_async_exit"),
    ("cuFileBatchIOSubmit", "api_batch_submit_enter", "api_batch_submit_exit"),
    ("cuFileBatchIOGetStatus", "api_batch_status_enter", "api_batch_status_exit"),
    ("cuFileHandleRegister", "api_handle_register_enter", "api_handle_register_exit"),
    ("cuFileHandleDeregister", "api_handle_deregister_enter", None),
    ("cuFileBufRegister", "api_buf_register_enter", "api_buf_register_exit"),
    ("cuFileDriverOpen", "api_driver_open_enter", "api_driver_open_exit"),
    ("cuFileGetVersion", "api_get_version_enter", "api_get_version_exit"),
]
KPROBES = [  # (symbols tried in order, handler, is_return)
    (("nvfs_nvme_blk_rq_map_sg", "nvfs_blk_rq_map_sg"), "kret_nvfs_blk_rq_map_sg", True),
    (("nvfs_dma_map_sg_attrs_nvme", "nvfs_dma_map_sg_attrs"), "kret_nvfs_dma_map_sg_attrs", True),
    (("nvfs_blk_rq_dma_map_iter_start",), "kret_nvfs_iter_start", True),
    (("nvfs_get_dma",), "kret_nvfs_get_dma", True),
    (("pci_p2pdma_map_segment",), "kret_pci_p2pdma_map_segment", True),
    (("nvfs_io_start_op",), "kprobe_nvfs_io_start_op", False),
]


def _no_libbcc(e: OSError) -> GdsdiagError:
    """bcc's Python module is there and its C library is not (it loads libbcc.so.0 at import)."""
    return GdsdiagError(
        f"bcc's library cannot be loaded ({e})",
        "apt-get install libbpfcc (Debian/Ubuntu) or dnf install bcc, or put the directory holding "
        "libbcc.so.0 on LD_LIBRARY_PATH",
    )


def import_bcc():
    """bcc's Python module (Debian/Ubuntu python3-bpfcc installs it for the system Python only)."""
    try:
        import bcc

        return bcc
    except ImportError:
        pass
    except OSError as e:
        raise _no_libbcc(e) from None
    for d in (
        "/usr/lib/python3/dist-packages",
        *glob.glob("/usr/lib/python3*/site-packages"),
        *glob.glob("/tmp/bcc/usr/lib/python3/dist-packages"),
    ):
        if os.path.isdir(os.path.join(d, "bcc")) and d not in sys.path:
            sys.path.append(d)
            try:
                import bcc

                return bcc
            except ImportError:
                sys.path.remove(d)
            except OSError as e:
                sys.path.remove(d)
                raise _no_libbcc(e) from None
    raise GdsdiagError(
        "bcc is not installed (no Python module 'bcc')",
        "apt-get install python3-bpfcc (Debian/Ubuntu) or dnf install python3-bcc",
    )


def probe_source(name: str) -> str:
    try:
        from importlib.resources import files

        return files("gdsdiag._probes").joinpath(name).read_text()
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        with open(os.path.join(here, "probes", name)) as f:
            return f.read()


def preflight() -> None:
    if os.geteuid() != 0:
        raise GdsdiagError("gdsdiag trace needs root (eBPF needs CAP_BPF and CAP_PERFMON)", "run it with sudo")
    if not os.path.isdir("/sys/kernel/tracing/events") and not os.path.isdir("/sys/kernel/debug/tracing/events"):
        os.system("mount -t tracefs nodev /sys/kernel/tracing >/dev/null 2>&1")
        if not os.path.isdir("/sys/kernel/tracing/events"):
            raise GdsdiagError("tracefs is not mounted", "mount -t tracefs nodev /sys/kernel/tracing")


def kprobes_available() -> bool:
    return os.path.exists("/sys/kernel/tracing/kprobe_events") or os.path.exists(
        "/sys/kernel/debug/tracing/kprobe_events"
    )


# Only these probes' arguments are used (file offset, size); every other route probe counts by
# firing. bcc generates an argument reader per argument and probe location: reading all arguments
# of all probes cost 11 s of compile CPU on the 2-vCPU dev VM, reading only these a fraction.
USDT_ARGS_USED = evidence.USDT_ARGS_USED
USDT_FOLDED = evidence.USDT_FOLDED


def program_text(block: bool = False) -> str:
    """The probe program's C text. What to trace (--pid/--cgroup/--comm, everything) and --per-io
    are not in it: they go into its 'config' map at load time (set_config), so one compiled program
    (and one entry of the compiled-program cache) serves every filter. --block adds tracepoints."""
    src = probe_source("cufile_trace.c")
    defs = f"#define TRACE_BLOCK {1 if block else 0}\n#define RAW_SYSCALLS {1 if raw_syscalls() else 0}\n"
    return src.replace("/*EVENTDEFS*/", c_defines() + defs, 1)


def raw_syscalls() -> bool:
    """Syscalls through raw tracepoints (x86-64; the register layout is read there): no perf record
    is filled for each syscall of every process. GDSDIAG_RAW_SYSCALLS=0 keeps the classic
    raw_syscalls tracepoints (the baseline of benchmarks/trace_overhead.py)."""
    import platform

    return platform.machine() == "x86_64" and os.environ.get("GDSDIAG_RAW_SYSCALLS", "1") != "0"


def config_values(
    trace_all: bool, cgroup: tuple[int, int] | None, comm: str | None, per_io: bool
) -> tuple[int, int, int, int, int, int, int]:
    """The probe program's 'config' record (struct config_t): cgroup id and level, trace_all, per_io,
    the --comm name's length and its 16 bytes, NUL-padded, as two little-endian words."""
    cg_id, cg_level = cgroup or (0, 0)
    name = (comm or "").encode()[:15]
    w0, w1 = struct.unpack("<QQ", name.ljust(16, b"\0"))
    return cg_id, cg_level, int(trace_all), int(per_io), len(name), w0, w1


def config_comment(values: tuple) -> str:
    cg_id, cg_level, trace_all, per_io, n, w0, w1 = values
    comm = struct.pack("<QQ", w0, w1)[:n].decode(errors="replace")
    return (
        f"/* config (written into the 'config' map at load time, not compiled in): trace_all={trace_all} "
        f"cgroup_id={cg_id} cgroup_level={cg_level} comm={comm!r} per_io={per_io} */\n"
    )


def kprobes_text() -> str:
    return probe_source("nvfs_kprobes.c").replace("/*EVENTDEFS*/", c_defines("kev_t", opens=False), 1)


def ebpf_text(
    libcufile: str | None, selective: bool, block: bool, cgroup: str | None, comm: str | None, per_io: bool
) -> str:
    """The program a trace with these options compiles (before it is running: USDT handlers for the
    --libcufile copy or the bindings' one; copies that traced processes map add handlers of the
    same generator), as bcc's tools print with --ebpf."""
    from ..procs import cgroup_target

    if libcufile:
        libs = [libcufile]
    else:
        from ...platform.libcufile import locate

        libs = [p for p in [locate().path] if p]
    cg = cgroup_target(cgroup)[:2] if cgroup else None
    p = Probes(libs, [], trace_all=not selective, block=block, cgroup=cg, comm=comm, per_io=per_io, load=False)
    return (
        p.src
        + "\n"
        + config_comment(p.config)
        + "\n/* ---- nvfs_kprobes.c: loaded too where nvidia-fs / P2PDMA symbols and kprobes exist ---- */\n"
        + kprobes_text()
    )


# bcc's words for a program its compile built and the kernel then refused (bcc/__init__.py load_func,
# attach_*): headers cannot fix those, so they get their own fix, by the errno's text
_KERNEL_REFUSED = ("Failed to load BPF program", "Failed to attach BPF program")
_REFUSAL_FIX = (
    (
        "Resource temporarily unavailable",
        # (kernel/bpf/verifier.c do_check: a signal pending while the verifier walks the program
        # ends the load with EAGAIN: a debugger or profiler attached to gdsdiag, a Ctrl-Z)
        "the kernel's verifier was interrupted by a signal (a debugger or profiler attached to gdsdiag, "
        "a stop): run it again without them",
    ),
    ("Operation not permitted", "run as root (CAP_BPF and CAP_PERFMON); a kernel in lockdown mode refuses it too"),
    ("Permission denied", "run as root (CAP_BPF and CAP_PERFMON); a kernel in lockdown mode refuses it too"),
)


def _bcc_failure(msg: str) -> GdsdiagError:
    """One line for bcc's failed BPF(): a compile error (the headers' fix) or the kernel refusing
    the compiled program (never the headers' fix: that would be a guess stated as the cause)."""
    last = msg.strip().splitlines()[-1][:200] if msg.strip() else ""
    if not last.startswith(_KERNEL_REFUSED):
        return _kernel_headers_hint(msg)
    fix = next((f for words, f in _REFUSAL_FIX if words in last), None)
    return GdsdiagError(
        f"the kernel refused the compiled probe program: {last}",
        fix or f"report it with the kernel version ({os.uname().release}) and the program gdsdiag trace --ebpf prints",
    )


def _kernel_headers_hint(msg: str) -> GdsdiagError:
    """A failed compile: with no headers tree for this kernel, the one command that provides one;
    with a tree there, headers are not the cause, and the fix does not say they are."""
    rel = os.uname().release
    last = msg.strip().splitlines()[-1][:200] if msg.strip() else "no kernel headers"
    if has_tree(rel):
        return GdsdiagError(
            f"bcc could not compile the probes: {last}",
            f"report it with the kernel version ({rel}), bcc's version and the program gdsdiag trace --ebpf prints",
        )
    return GdsdiagError(
        f"bcc could not compile the probes (no kernel headers tree at /lib/modules/{rel}/build): {last}",
        "the probes read no kernel structs, so the nearest tree serves; as root: " + fix_command(rel),
    )


_TS = operator.attrgetter("ts")
_OpenRecord = __import__("collections").namedtuple("_OpenRecord", [f for f, *_ in OPEN_FIELDS])
FD_PSEUDO, FD_DATA = dict(FD_KINDS)["FD_PSEUDO"], dict(FD_KINDS)["FD_DATA"]
# records held undecoded: past this the events ring is left unread (one more read of it at most:
# ~130k records), so a stream Python cannot keep up with fills the ring and the kernel counts what it
# cannot send, per process and file (probes/cufile_trace.c: lost I/O into hostagg; issue 43). Records
# read and then dropped here could only be counted per process (tally_records), not per file.
RAW_BACKLOG = 1_000_000  # (~130 MiB)
# an events-ring record as it lies in the ring (ringread.py): 8-byte header, struct event_t, padding
REC_STRIDE = (8 + EVENT_SIZE + 7) & ~7
_REC_TS = struct.Struct("<8xQ")  # a record's timestamp
_SYNC_IO = frozenset(("cuFileRead", "cuFileWrite"))
REC_STRUCT = struct.Struct(f"<8x{EVENT_STRUCT.format.lstrip('<')}{REC_STRIDE - 8 - EVENT_SIZE}x")
OPEN_EXEC, OPEN_RENAME_FROM, OPEN_RENAME_TO, OPEN_STDERR = (
    dict(OPEN_KINDS)[k] for k in ("OPEN_EXEC", "OPEN_RENAME_FROM", "OPEN_RENAME_TO", "OPEN_STDERR")
)
RENAME_NAMES = {v: name for _, v, name in RENAMES}
O_TMPFILE = 0o20000000  # (__O_TMPFILE: an unnamed file in the directory the open names)
ADOPTED_SERIAL = 1 << 52  # serials of descriptors adopted from /proc (the kernel's count from 1 << 12)
_EV_SYS_EXIT = dict((n, v) for n, v, *_ in EVENT_KINDS)["EV_SYS_EXIT"]
_EV_API_EXIT = dict((n, v) for n, v, *_ in EVENT_KINDS)["EV_API_EXIT"]
# a cuFileRead/Write's exit: the call is one I/O (True: a read), its result in a0; its own thread's
# pread64/pwrite64 ride in that record (record version 4), so they are not counted twice
API_IOS = {v: n == "API_READ" for n, v, *_ in API_IDS if n in ("API_READ", "API_WRITE")}
# the syscall ids of host reads and writes (True: a read), as the probe's io_dir() has them
IO_SYSCALLS = {
    v: n in ("SYS_PREAD64", "SYS_PREADV", "SYS_PREADV2", "SYS_READ", "SYS_READV")
    for n, v, *_ in SYSCALL_IDS
    if n[4:] in ("PREAD64", "PREADV", "PREADV2", "READ", "READV", "PWRITE64", "PWRITEV", "PWRITEV2", "WRITE", "WRITEV")
}


def _tally_uniform(blob: bytes, into: Unclassified, cufile_exits: Counter | None = None) -> bool:
    """tally_records when every record is the same process's same kind of event (one thread reading
    as fast as it can: what overloads the trace), by comparing whole columns in C: True if it was."""
    from array import array

    quads = memoryview(blob).cast("q")
    w = REC_STRIDE // 8
    who, what = quads[2::w], quads[3::w]
    n = len(who)
    if who != memoryview(array("q", [who[0]]) * n) or what != memoryview(array("q", [what[0]]) * n):
        return False
    pid = who[0] & 0xFFFFFFFF
    kind, nr = what[0] & 0xFFFFFFFF, what[0] >> 32
    if kind == _EV_SYS_EXIT and nr in IO_SYSCALLS:
        rets = quads[9::w]
        moved = sum(rets) if min(rets) >= 0 else sum(filter((0).__lt__, rets))  # (a failed call moved nothing)
        count_unclassified(into, pid, n, n, moved, read=IO_SYSCALLS[nr])
    elif kind == _EV_API_EXIT and nr in API_IOS:
        # (an exit is the call's I/O when its own syscalls were folded into it: classify.exit_is_io)
        ios = [r for r, k in zip(quads[4::w], quads[5::w]) if k > 0]
        count_unclassified(into, pid, n, len(ios), sum(filter((0).__lt__, ios)), read=API_IOS[nr])
        if ios and cufile_exits is not None:
            cufile_exits[(pid, (who[0] >> 32) & 0xFFFFFFFF)] += len(ios)
    else:
        count_unclassified(into, pid, n)
    return True


_USDT, _HANDLE_REGISTER, _FORK = 1, 2, 3  # how a record is decoded beyond its kind and name (_record_name)


def _record_name(typ: int, rid: int) -> tuple[str, str, int]:
    """(kind, name, how) of an events-ring record of type TYP and id RID; how: 0 plain, _USDT (the
    name is the attached site's, the arguments as many as the probe gave), _HANDLE_REGISTER (the
    fd's path is looked up). Probes._decode keeps these per (type, id)."""
    kind = KINDS.get(typ, str(typ))
    if kind == "sys_exit":
        return kind, SYS_NAMES.get(rid, str(rid)), 0
    if kind == "usdt":
        return kind, "", _USDT
    if kind in ("fd", "proc"):
        name = (FD_NAMES if kind == "fd" else PROC_NAMES).get(rid, str(rid))
        return kind, name, _FORK if name == "fork" else 0
    if kind == "pages":
        return kind, "page_cache_fill", 0
    if kind == "majflt":
        return kind, "major_fault", 0
    if kind in ("blk_issue", "blk_done"):
        return kind, "block_rq_issue" if kind == "blk_issue" else "block_rq_complete", 0
    name = API_NAMES.get(rid, str(rid))
    return kind, name, _HANDLE_REGISTER if kind == "handle" and name == "cuFileHandleRegister" else 0


def tally_records(blob: bytes, into: Unclassified, cufile_exits: Counter | None = None) -> None:
    """Per process, the records of BLOB (ring records, REC_STRIDE bytes each) and the reads and writes
    among them with their bytes, added to INTO (tally.Unclassified) without
    decoding each record, so what a stop cannot classify is still counted exactly. A stop under load
    drops up to a million records here, inside the summary's one-second budget: every pass is a C
    loop over one strided column (the process id, the record kind and syscall, the result), never a
    Python step per record (0.06 s for a million records of one process; the version that counted
    (pid, kind) pairs took 0.31 s). CUFILE_EXITS: {(pid, tid): n} of the cuFile exits counted as I/Os is added to
    (Classifier.exits_counted: the calls they end are not decided again)."""
    from itertools import compress

    if not blob:
        return
    if _tally_uniform(blob, into, cufile_exits):
        return
    words = memoryview(blob).cast("i")  # little-endian 32-bit halves
    w = REC_STRIDE // 4
    # (after the 8-byte header and ts: word 2 is pid | tid << 32, word 3 type | id << 32, word 9 a[5])
    pids, kinds, calls = words[4::w].tolist(), words[6::w].tolist(), words[7::w].tolist()
    rets = memoryview(blob).cast("q")[9 :: REC_STRIDE // 8].tolist()
    per_pid = Counter(pids)
    for pid, n in per_pid.items():
        mine = (lambda col: col) if len(per_pid) == 1 else (lambda col, p=pid: list(compress(col, map(p.__eq__, pids))))
        count_unclassified(into, pid, n)
        k, c = mine(kinds), mine(calls)
        exits = c if k.count(_EV_SYS_EXIT) == len(k) else list(compress(c, map(_EV_SYS_EXIT.__eq__, k)))
        per_call = Counter(exits)
        ios = [nr for nr in per_call if nr in IO_SYSCALLS]
        if not ios:
            continue
        r = mine(rets)
        if len(k) != len(exits):  # (the results of the syscall exits only)
            r = list(compress(r, map(_EV_SYS_EXIT.__eq__, k)))
        for nr in ios:
            got = r if len(per_call) == 1 else list(compress(r, map(nr.__eq__, exits)))
            moved = sum(got) if min(got) >= 0 else sum(filter((0).__lt__, got))  # (a failed call moved nothing)
            count_unclassified(into, pid, 0, per_call[nr], moved, read=IO_SYSCALLS[nr])
    _tally_api_ios(blob, pids, kinds, calls, into, cufile_exits)


def _tally_api_ios(
    blob: bytes, pids: list, kinds: list, calls: list, into: Unclassified, cufile_exits: Counter | None
) -> None:
    """tally_records' cuFileRead/Write exits that are I/Os (their own syscalls folded in them:
    classify.exit_is_io): each one I/O of its process, the bytes its result says."""
    from itertools import compress

    if _EV_API_EXIT not in kinds:
        return
    sel = list(map(_EV_API_EXIT.__eq__, kinds))  # (C passes over the columns; a step per exit only)
    quads = memoryview(blob).cast("q")
    results = compress(quads[4 :: REC_STRIDE // 8].tolist(), sel)  # (a0)
    folded = compress(quads[5 :: REC_STRIDE // 8].tolist(), sel)  # (a1: the syscalls folded)
    tids = compress(memoryview(blob).cast("i")[5 :: REC_STRIDE // 4].tolist(), sel)
    for pid, tid, nr, ret, n_sys in zip(compress(pids, sel), tids, compress(calls, sel), results, folded):
        if nr in API_IOS and n_sys > 0:
            count_unclassified(into, pid, 0, 1, max(ret, 0), read=API_IOS[nr])
            if cufile_exits is not None:
                cufile_exits[(pid, tid)] += 1


# The flags the probe program is compiled with: tests/conftest.py compiles it with the same, so the
# record layout and verifier tests check what the tool loads.
CFLAGS = ("-Wno-macro-redefined",)


def _all_items(table) -> list:
    """Every (key, value) of a BPF hash map: BPF_MAP_LOOKUP_BATCH (kernel 5.6+), a few syscalls for
    the whole map, where bcc's items() makes two a key (a node-wide trace's counters -- every process,
    open and size class -- made that most of the exporter's stop on a signal: 0.16 of 0.45 s here).
    Not bcc's own items_lookup_batch: in the bcc releases here (0.26, 0.29) its batch token and count
    are one variable, right only while one call returns the whole map; a map changed under the read
    can take a second call. Where the kernel refuses the batch (old kernel, a bucket over the
    buffer), key by key."""
    import ctypes as ct
    import errno

    try:
        from bcc.libbcc import lib

        n = int(table.max_entries)
        keys, values = (table.Key * n)(), (table.Leaf * n)()
        token_in, token_out, count = ct.c_uint32(0), ct.c_uint32(0), ct.c_uint32(0)
        total, first = 0, True
        while total < n:
            count.value = n - total
            res = lib.bpf_lookup_batch(
                table.map_fd,
                None if first else ct.byref(token_in),
                ct.byref(token_out),
                ct.byref(keys, ct.sizeof(table.Key) * total),
                ct.byref(values, ct.sizeof(table.Leaf) * total),
                ct.byref(count),
            )
            err = ct.get_errno()
            total += count.value
            if res != 0:
                if err == errno.ENOENT:  # the map's end: this call's entries are in
                    break
                raise OSError(err, os.strerror(err))
            token_in.value, first = token_out.value, False
        # (an array of a plain C type gives Python ints; items() gives the type's objects)
        k_of = table.Key if issubclass(table.Key, ct._SimpleCData) else (lambda x: x)
        v_of = table.Leaf if issubclass(table.Leaf, ct._SimpleCData) else (lambda x: x)
        return [(k_of(keys[i]), v_of(values[i])) for i in range(total)]
    except (AttributeError, ImportError, OSError, TypeError):
        return list(table.items())


class Probes:
    """The attached programs; ``poll()`` returns the Events that arrived."""

    def __init__(
        self,
        libcufile: str | list[str] | None,
        pids: list[int],
        trace_all: bool,
        want_kprobes: bool = True,
        block: bool = False,
        cgroup: tuple[int, int] | None = None,
        comm: str | None = None,
        cmd: list[str] | None = None,
        preattach: bool = True,
        per_io: bool = False,
        load: bool = True,
    ):
        """Generate the program (USDT handlers for the libcufile copies given), compile, load and
        attach it; with load=False only generate it (``self.src``: --ebpf, no root or bcc needed)."""
        self.attached: list[str] = []
        self.failed: list[str] = []
        self.lost = 0
        self._perf_lost = 0
        self._events: list[Event] = []
        self._rename_from: dict[int, tuple[str, int]] = {}  # tid -> a rename's old path and dfd (_on_rename)
        self._said = StderrLines()  # stderr writes -> the lines that name the data path (_on_stderr)
        self._held: list[Event] = []
        self._held_ts: list[int] = []  # their timestamps (poll: _in_order)
        self._lost_read_ns = 0
        self.usdt_names: dict[int, str] = {}
        self.timing: dict[str, float] = {}
        t = time.monotonic()
        src = program_text(block)
        self.config = config_values(trace_all, cgroup, comm, per_io)
        self.libcufile = libcufile
        self.libraries: list[dict] = []  # every libcufile / libcuda copy probed: path, kind, probes, pids
        self._lib_keys: dict[tuple[int, int], dict] = {}
        self._layouts: dict[tuple, str] = {}  # (probe, argument specs) -> handler compiled in
        self._sites: dict[str, list] = {}  # libcufile path -> its route-probe sites
        self._proc_sites: dict[tuple, dict] = {}  # libcuda build -> its cuGetProcAddress copy sites
        self._asking_builds: set[tuple] = set()  # builds whose child was started (cudadoors.Asking)
        self._asking: list[tuple] = []  # (Asking, path, build, addresses attached) not yet answered
        self._started = False  # True once start-up's libraries are probed: later ones ask async
        libcufiles = [libcufile] if isinstance(libcufile, str) else list(libcufile or [])
        candidates = self._preattach_candidates(cmd) if preattach else []
        for c in candidates:
            if os.path.basename(c).startswith("libcufile.so") and not any(_same_inode(c, x) for x in libcufiles):
                libcufiles.append(c)
        for lib in libcufiles:
            src += self._usdt_handlers_for(lib)
        if not libcufiles:
            self.failed.append(
                "libcufile not found: no cuFile probes until a traced process maps one (syscall tracepoints meanwhile)"
            )
        self.timing["usdt_s"] = round(time.monotonic() - t, 2)
        self.src = src
        if not load:
            return
        bcc = import_bcc()
        self.bcc = bcc
        t = time.monotonic()
        self.b = self._compile_or_cached(bcc, src)
        self.set_config()
        self._um = self._uprobe_links()
        self.timing["compile_load_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        self.attached += [
            ("raw tracepoint" if raw_syscalls() else "tracepoint raw_syscalls:")
            + " sys_enter/sys_exit for open/openat/openat2/creat/close/dup*/"
            "fcntl(F_DUPFD)/lseek/mmap, read/write/readv/writev/pread64/pwrite64/preadv(2)/pwritev(2), "
            "copy_file_range/sendfile/splice, ioctl(nvidia-fs), io_submit (per iocb), io_uring_enter",
            "tracepoint io_uring: submit_req/file_get/complete (joined per request)",
            "tracepoint filemap: mm_filemap_add_to_page_cache (mmap page-cache fills)",
            "tracepoint sched: process_fork/exec/exit (process trees, in the kernel)",
        ]
        if block:
            self.attached.append("tracepoint block:block_rq_issue/complete")
        self.major_faults = self._major_faults()
        for p in pids:
            self.add_pid(p)
        for lib in libcufiles:
            self.attach_library(lib)
        libcuda = _find_libcuda()
        if libcuda:  # the system's driver first: it is the one asked for its cuGetProcAddress doors
            self.attach_library(libcuda)
        for c in candidates:
            if os.path.basename(c).startswith("libcuda.so"):
                self.attach_library(c)
        self._started = True
        if not any(x["kind"] == "libcuda" for x in self.libraries):
            self.failed.append(
                "libcuda.so.1 not found here: CUDA copies are seen only in a libcuda a traced process maps"
            )
        self.kb: Any = None  # bcc's BPF of the kprobe program, when this kernel has kprobes
        if want_kprobes:
            self._kprobes()
        self.timing["attach_s"] = round(time.monotonic() - t, 2)
        self._init_records()
        self._adopt_serial = ADOPTED_SERIAL
        self._rr = self._ring_reader()
        if self._rr is None:
            self.b["events"].open_ring_buffer(self._on_event)
        self.b["opens"].open_ring_buffer(self._on_open)
        if self.kb is not None:
            self.kb["kevents"].open_perf_buffer(self._on_kevent, page_cnt=64, lost_cb=self._on_lost)

    def _init_records(self) -> None:
        """The state of the records between the ring and the events poll() returns."""
        # event records as they came (runs of REC_STRIDE-byte records, and how many), decoded in
        # one pass per poll
        self._raw: list[tuple[bytes, int]] = []
        self._raw_n = 0
        self._backlog_lost = 0
        self.backlog_lost_by_pid: Unclassified = {}  # records dropped here (RAW_BACKLOG): tally_records
        # (pid, tid) of cuFile exits counted as I/Os without a record classified: dropped here, or
        # by the kernel (lost_exits: cufile_exits_counted): Classifier.exits_counted
        self.exits_counted: Counter[tuple[int, int]] = Counter()  # (how many per thread)
        self._comms: dict[bytes, str] = {}
        # whole sync cuFile calls paired from the records before they are decoded (wholecalls.py,
        # set by the live loop with ``pair_whole_calls``): taken by ``take_whole``
        self._whole: WholeCalls | None = None
        self._whole_busy: Callable[[], tuple[Iterable[int], dict[int, tuple[int, int]], Callable | None]] | None = None
        self._whole_pairs: list = []
        self._bounce_pairs: list = []  # (bounce pairs: a read, then the copy of its buffer; take_bounce)
        self._names: dict[int, tuple[str, str, int]] = {}  # (type << 32 | id) -> _record_name

    @classmethod
    def offline(cls) -> Probes:
        """Probes with no program and no rings, whose poll() orders and decodes only the records
        handed to ``_keep`` (and events put in ``_events``): the record path without bcc or root
        (tests/test_trace_wholecalls.py). ``clock`` can be set to give poll() its time."""
        self = cls.__new__(cls)
        self.failed, self.lost, self._perf_lost = [], 0, 0
        self._events, self._held, self._held_ts, self._lost_read_ns = [], [], [], 0
        self.usdt_names, self.timing = {}, {}
        self.b, self.kb, self._rr = _NoRings(), None, None
        self._asking = []
        self._init_records()
        return self

    def give_records(self, blob: bytes, n: int) -> None:
        """Offline probes: N ring records (REC_STRUCT each, in BLOB) as the ring would hand them over."""
        self._keep(blob, n)

    def give_events(self, events: Iterable[Event]) -> None:
        """Offline probes: events the opens ring's own callback would have decoded (opens, execs)."""
        self._events.extend(events)

    def _preattach_candidates(self, cmd: list[str] | None) -> list[str]:
        """Library files a program may map later, probed before it runs (see libfind)."""
        from .libfind import candidate_libraries

        t = time.monotonic()
        try:
            out = candidate_libraries(cmd)
        except Exception as e:  # a search that fails must not stop the trace
            self.failed.append(f"library search before start: {type(e).__name__}: {e}")
            out = []
        self.timing["preattach_search_s"] = round(time.monotonic() - t, 2)
        return out

    def _compile_or_cached(self, bcc, src: str):
        """bcc's compile of the program, or the same program loaded from the cache of an earlier
        compile (bpfcache.py: same text, kernel and bcc); a compile fills the cache."""
        from . import bpfcache

        cflags = list(CFLAGS)
        k = bpfcache.key(src, cflags, str(getattr(bcc, "__version__", "?"))) if bpfcache.enabled() else None
        doc = bpfcache.load(k) if k else None
        if doc is not None:
            try:
                b = bpfcache.cached_bpf(bcc, doc)
                self.timing["cached"] = True
                return b
            except Exception as e:  # the kernel refused it: compile as if there were no cache
                self.failed.append(f"compiled-program cache not used ({e}); compiled instead")
        try:
            with stdout_to_stderr():  # bcc's loader prints some of its words to stdout
                b = bcc.BPF(text=src, cflags=cflags)
        except Exception as e:  # bcc raises bare Exception for a failed compile or load: named, with the fix
            raise _bcc_failure(str(e)) from None
        self.timing["cached"] = False
        if k:
            try:
                bpfcache.save(b, k)
            except Exception as e:  # never a reason to stop the trace
                self.failed.append(f"compiled-program cache not written: {e}")
        return b

    def _usdt_notes(self, lib: str) -> list:
        from ...platform.libcufile import read_usdt_notes
        from .usdt import Site

        if lib in self._sites:
            return self._sites[lib]
        try:
            notes = read_usdt_notes(lib)
        except (OSError, ValueError) as e:
            self.failed.append(f"USDT: cannot read notes of {lib}: {e}")
            notes = []
        sites = [Site(n.key, n.pc, n.args) for n in notes if n.key in ROUTE_USDT and not n.semaphore]
        present = {x.key for x in sites}
        if not notes:
            self.failed.append(f"USDT: {lib} carries no USDT probes; using uprobes + syscall tracepoints")
        elif len(present) < len(ROUTE_USDT):
            self.failed.append(f"USDT probes absent in {lib}: " + ", ".join(k for k in ROUTE_USDT if k not in present))
        self._sites[lib] = sites
        return sites

    def _usdt_handlers_for(self, lib: str) -> str:
        """C handlers for the route probes of one libcufile copy: one per distinct (probe, layout of
        the arguments read), shared with any copy of the same build."""
        from .usdt import UnsupportedSpec, handler, layout

        out: list[str] = []
        for site in self._usdt_notes(lib):
            lay = layout(site, USDT_ARGS_USED.get(site.key, 0))
            if lay in self._layouts:
                continue
            name = f"usdt_{len(self._layouts)}"
            try:
                out.append(handler(name, ROUTE_USDT.index(site.key), lay[1], USDT_FOLDED.get(site.key, "")))
            except UnsupportedSpec as e:
                self.failed.append(f"usdt {site.key} in {lib}: argument spec {e} not supported")
                continue
            self._layouts[lay] = name
            self.usdt_names[ROUTE_USDT.index(site.key)] = site.key
        return "\n".join(out)

    def _attach_usdt(self, path: str) -> tuple[int, int]:
        """Attach the compiled handlers at this copy's probe addresses: (attached, without a handler)."""
        from .usdt import layout

        ok = missing = 0
        for site in self._usdt_notes(path):
            name = self._layouts.get(layout(site, USDT_ARGS_USED.get(site.key, 0)))
            if name is None:
                missing += 1
                continue
            where = f"{site.key} at {site.pc:#x} in {path}"
            if self._attach("usdt", where, lambda name=name, pc=site.pc: self._uprobe(path, name, addr=pc)):
                ok += 1
        return ok, missing

    def attach_library(self, path: str, pid: int | None = None) -> dict | None:
        """Probe one libcufile or libcuda file, once per (device, inode) however many paths or
        processes lead to it: uprobes on its API (libcufile) or on every cuMemcpy* door (libcuda).
        Uprobes are per file, so every process mapping it is covered."""
        if isinstance(self.b, _NoRings):
            # (offline: a replayed recording's paths are anyone's words, never a file of this node
            # to read, probe or load -- its libcuda's answers come from a child that loads it)
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (st.st_dev, st.st_ino)
        lib = self._lib_keys.get(key)
        if lib is None:
            base = os.path.basename(path)
            kind = (
                "libcufile" if base.startswith("libcufile.so") else "libcuda" if base.startswith("libcuda.so") else None
            )
            if kind is None:
                return None
            lib = {"path": path, "kind": kind, "usdt": 0, "uprobes": 0, "pids": []}
            self._lib_keys[key] = lib
            self.libraries.append(lib)
            if kind == "libcufile":
                lib["usdt"], missing = self._attach_usdt(path)
                if missing:
                    self.failed.append(
                        f"usdt: {missing} probe sites of {path} have an argument layout not compiled in "
                        f"(a different build found while tracing): uprobes and syscalls only for them"
                    )
                for sym, enter, ret in API_UPROBES:

                    def both(sym=sym, enter=enter, ret=ret) -> None:
                        self._uprobe(path, enter, sym=sym)
                        if ret:
                            self._uprobe(path, ret, sym=sym, ret=True)

                    if self._attach("uprobe", f"{sym} in {path}", both):
                        lib["uprobes"] += 1
                self.attached.append(
                    f"uprobes {lib['uprobes']} cuFile API functions and {lib['usdt']} USDT sites in {path}"
                )
                if lib["usdt"]:
                    self.attached += sorted({f"usdt {x.key}" for x in self._usdt_notes(path)})
            else:
                lib["uprobes"] = self.attach_cuda_copies(path)
        if pid is not None and pid not in lib["pids"]:
            lib["pids"].append(pid)
        return lib

    def scan_maps(self, pid: int) -> None:
        """Every libcufile / libcuda the process has mapped now (/proc/PID/maps)."""
        from ..procs import mapped_paths

        if isinstance(self.b, _NoRings):
            return  # (offline: the records' processes are not this node's)

        for p in mapped_paths(pid, "/libcu"):
            base = os.path.basename(p)
            if base.startswith(("libcufile.so", "libcuda.so", "libcudart.so")):
                # a process with CUDA mapped: its host I/O is sent one by one (a copy may follow)
                self.b["gpu_procs"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)
                self.bump_epoch()
            if base.startswith(("libcufile.so", "libcuda.so")) and not p.endswith(" (deleted)"):
                self.attach_library(p, pid)

    def attach_cuda_copies(self, libcuda: str) -> int:
        """Every exported cuMemcpy* door with a host side we can read from registers: the plain and
        _v2 forms, Async, and the per-thread default stream _ptds/_ptsz variants libcudart calls;
        and the addresses cuGetProcAddress hands out for them where no exported symbol lies there
        (what libcudart and kvikio call)."""
        from .cudadoors import Asking
        from .elfsyms import dynamic_symbol_addresses

        try:
            syms = dynamic_symbol_addresses(libcuda)
        except (OSError, ValueError) as e:
            self.failed.append(f"libcuda {libcuda}: cannot read its symbols: {e}")
            return 0
        n = 0
        at: set[int] = set()
        for sym in sorted(syms):
            fn = cuda_copy_handler(sym)
            if fn is None or syms[sym] in at:
                continue
            if self._attach("uprobe libcuda", sym, lambda fn=fn, sym=sym: self._uprobe(libcuda, fn, sym=sym)):
                at.add(syms[sym])
                n += 1
        build = tuple(sorted((k, v) for k, v in syms.items() if k.startswith("cuMemcpy")))
        self.attached.append(f"uprobes {n} cuMemcpy* entry points in {libcuda}")
        if build in self._proc_sites:  # (asked of another copy of this build already)
            self._attach_proc_sites(libcuda, self._proc_sites[build], at)
        elif build not in self._asking_builds:
            # a child asks the driver (cudadoors.py: never loaded here); at start the trace waits
            # for its answer (a program may dlopen libcuda and copy before the next poll), for a
            # library found while tracing it is attached at a later poll (attach_answers)
            self._asking_builds.add(build)
            asking = Asking(libcuda)
            if self._started:
                self._asking.append((asking, libcuda, build, at))
            else:
                self._answered(asking.result(wait=True), libcuda, build, at)
        return n

    def attach_answers(self) -> None:
        """Attach the cuGetProcAddress sites of the libcuda copies whose child has answered."""
        if not self._asking:
            return
        waiting = []
        for item in self._asking:
            asking, libcuda, build, at = item
            if asking.done():
                self._answered(asking.result(), libcuda, build, at)
            else:
                waiting.append(item)
        self._asking = waiting

    def _answered(self, answer: tuple[dict[int, str], str | None], libcuda: str, build: tuple, at: set[int]) -> None:
        sites, why = answer
        self._proc_sites[build] = sites
        if why:
            self.failed.append(f"libcuda {libcuda}: cuGetProcAddress entry points not probed: {why}")
        self._attach_proc_sites(libcuda, sites, at)

    def _attach_proc_sites(self, libcuda: str, sites: dict[int, str], at: set[int]) -> None:
        extra = 0
        for addr, fn in sorted(sites.items()):
            if addr in at:
                continue
            if self._attach(
                "uprobe libcuda",
                f"{addr:#x} (cuGetProcAddress)",
                lambda fn=fn, addr=addr: self._uprobe(libcuda, fn, addr=addr),
            ):
                at.add(addr)
                extra += 1
        if extra:
            self.attached.append(f"uprobes {extra} more in {libcuda} that cuGetProcAddress hands out")

    def _major_faults(self) -> bool:
        """The perf software event page-faults-major on every CPU (a file's major faults: the kernel's
        own count of faults that waited for I/O); False, with the reason, where it cannot be opened."""
        try:
            self.b.attach_perf_event(
                ev_type=self.bcc.PerfType.SOFTWARE,
                ev_config=self.bcc.PerfSWConfig.PAGE_FAULTS_MAJ,
                fn_name="on_major_fault",  # (bpfcache.PERF_EVENT_PROGRAMS: loaded as a perf event's)
                sample_period=1,
            )
        except Exception as e:  # noqa: BLE001 (bcc raises bare Exception; the trace goes on without them)
            self.failed.append(f"perf software event page-faults-major: {e}: a file's major faults are not counted")
            return False
        self.attached.append("perf software event page-faults-major (major faults in mapped data files)")
        return True

    def _kprobes(self) -> None:
        from ...platform.fsroot import FsRoot
        from ...platform.kernel import read_kallsyms

        wanted = frozenset(s for syms, _, _ in KPROBES for s in syms)
        ks = read_kallsyms(FsRoot("/"), wanted)
        present = [(next((s for s in syms if ks.has(s)), None), fn, ret) for syms, fn, ret in KPROBES]
        if not any(s for s, _, _ in present):
            self.failed.append(
                "nvidia-fs / P2PDMA kernel probes: none of their symbols in /proc/kallsyms (nvidia-fs not loaded, no P2PDMA)"
            )
            return
        if not kprobes_available():
            self.failed.append("nvidia-fs / P2PDMA kernel probes: this kernel has no kprobes")
            return
        with stdout_to_stderr():
            self.kb = self.bcc.BPF(text=kprobes_text())
        for sym, fn, ret in present:
            if not sym:
                continue
            how = self.kb.attach_kretprobe if ret else self.kb.attach_kprobe
            if self._attach("kprobe", sym, lambda how=how, sym=sym, fn=fn: how(event=sym, fn_name=fn)):
                self.attached.append(f"{'kretprobe' if ret else 'kprobe'} {sym}")

    def _uprobe_links(self):
        """uprobe_multi links for the uprobes (uprobemulti.py: detached in a fraction of the time),
        unless GDSDIAG_UPROBE_MULTI=0 or this bcc object cannot give its instructions."""
        from .uprobemulti import UprobeLinks

        if os.environ.get("GDSDIAG_UPROBE_MULTI", "1") == "0":
            return None
        b = self.b
        cached = getattr(b, "insns", None)
        if cached is not None:  # bpfcache.CachedBPF keeps what it loaded
            return UprobeLinks(b, lambda fn: cached[fn], b.license)
        from bcc.libbcc import lib

        mod = b.module

        def insns_of(fn: str) -> bytes:
            name = fn.encode()
            start, size = lib.bpf_function_start(mod, name), lib.bpf_function_size(mod, name)
            if not start:
                raise KeyError(fn)
            return ctypes.string_at(start, size)

        return UprobeLinks(b, insns_of, lib.bpf_module_license(mod))

    def _uprobe(self, path: str, fn: str, sym: str | None = None, addr: int | None = None, ret: bool = False):
        """Attach handler FN at SYM or ADDR of PATH (ret: on return): as a uprobe_multi link where
        the kernel makes them, else as bcc's perf-event uprobe (the first refusal decides for all)."""
        from .uprobemulti import Unsupported

        if self._um is not None:
            try:
                return self._um.attach(path, fn, sym=sym, addr=addr, ret=ret)
            except Unsupported as e:
                if not self._um.links:
                    self._um = None
                    self.failed.append(f"uprobe_multi links not made ({e}): perf-event uprobes (slower to detach)")
        kw = {"sym": sym} if sym is not None else {"addr": addr}
        (self.b.attach_uretprobe if ret else self.b.attach_uprobe)(name=path, fn_name=fn, **kw)

    def _attach(self, kind: str, what: str, fn) -> bool:
        """One attach step: FN() attaches one probe. A refusal (bcc raises Exception for every one:
        no such symbol, the kernel said no) is recorded in ``failed`` as "KIND WHAT: why", never
        silently, and never stops the trace; True when it attached."""
        try:
            fn()
        except Exception as e:  # (bcc's refusals are plain Exceptions)
            self.failed.append(f"{kind} {what}: {e}")
            return False
        return True

    def set_config(self) -> None:
        """What to trace, into the program's 'config' map (before any probe is attached)."""
        t = self.b["config"]
        cg_id, cg_level, trace_all, per_io, n, w0, w1 = self.config
        v = t.Leaf()
        v.cgroup_id, v.cgroup_level, v.trace_all, v.per_io, v.comm_len = cg_id, cg_level, trace_all, per_io, n
        v.comm[0], v.comm[1] = w0, w1
        t[ctypes.c_int(0)] = v
        self.bump_epoch()

    def cufile_exits_counted(self) -> Counter[tuple[int, int]]:
        """{(pid, tid): n} of the cuFile exits counted as I/Os with no record to classify: dropped by the
        reader's backlog or, with the ring full, by the kernel (lost_exits; their I/O is in
        lost_by_process). Classifier.exits_counted retires the calls they end."""
        try:
            for k, v in self.b["lost_exits"].items():
                self.exits_counted[(int(k.value) >> 32, int(k.value) & 0xFFFFFFFF)] += int(v.value)
        except (KeyError, OSError, AttributeError):  # (maps gone)
            pass
        return self.exits_counted

    def read_fills(self) -> dict[tuple[int, int, int], int] | None:
        """(pid, kernel dev, ino) -> bytes the kernel added to the page cache inside the process's
        reads of that data file (its page-cache misses, readahead included; probes/cufile_trace.c
        read_fills), or None where the map could not be read (the caller says the hit share is
        unknown, never 0 %)."""
        try:
            items = list(self.b["read_fills"].items())
        except (KeyError, OSError, AttributeError):  # (maps gone)
            return None
        page = os.sysconf("SC_PAGE_SIZE")
        return {(int(k.tgid), int(k.dev), int(k.ino)): int(v.value) * page for k, v in items}

    def lost_by_process(self) -> list[dict]:
        """Events the kernel dropped (ring full), per process, most first: [{pid, lost, ios, bytes}],
        ios/bytes the reads and writes among them (counted in the kernel, with the bytes they moved)."""
        try:
            items = [(int(k.value), v) for k, v in self.b["drops_by_tgid"].items()]
        except (KeyError, OSError, AttributeError):  # (maps gone)
            items = []
        rows = [
            {
                "pid": p,
                "lost": int(v.events),
                "ios": int(v.reads) + int(v.writes),
                "bytes": int(v.read_bytes) + int(v.write_bytes),
                "reads": int(v.reads),
                "read_bytes": int(v.read_bytes),
            }
            for p, v in items
            if int(v.events)
        ]
        by = {r["pid"]: r for r in rows}
        for pid, (n, ios, nbytes, reads, rbytes) in self.backlog_lost_by_pid.items():  # dropped in our backlog
            r = by.setdefault(pid, {"pid": pid, "lost": 0, "ios": 0, "bytes": 0, "reads": 0, "read_bytes": 0})
            r["lost"] += n
            r["ios"] += ios
            r["bytes"] += nbytes
            r["reads"] += reads
            r["read_bytes"] += rbytes
        return sorted(by.values(), key=lambda r: (-r["lost"], r["pid"]))

    def add_pid(self, pid: int) -> None:
        self.b["traced"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)
        self.bump_epoch()

    def bump_epoch(self) -> None:
        """The traced set, gpu_procs or the config changed from here: every thread's cached view of
        them (the program's 'threads' array) is read again at its next syscall."""
        self._epoch = getattr(self, "_epoch", 0) + 1
        self.b["epoch"][ctypes.c_int(1)] = ctypes.c_uint64(self._epoch)

    def adopt(self, pids: list[int]) -> None:
        """Processes that existed before the probes: their open descriptors (path, position, flags)
        become synthetic open events stamped before the /proc walk, so any open or close the kernel
        reports after it wins."""
        from ..procs import describe, open_files

        ts = time.monotonic_ns()
        for pid in pids:
            info = describe(pid)
            if info is None:
                continue
            self._events.append(Event(ts, pid, pid, "proc", "adopt", [info.ppid], info.comm, info.exe))
            # descriptors it opened before the trace: the kernel learns their kinds here, and that
            # this process may hold others it never saw opened (their closes are reported)
            self.b["heirs"][ctypes.c_uint32(pid)] = ctypes.c_uint8(1)
            for fd, path, pos, flags, dev, ino in open_files(pid):
                self.add_data_inode(dev, ino)
                serial = 0
                if path.startswith(("/proc/", "/sys/", "/dev/")):
                    kind = FD_PSEUDO
                else:
                    self._adopt_serial += 1
                    serial = self._adopt_serial
                    kind = FD_DATA | serial << 8
                self.b["fdinfo"][ctypes.c_uint64(pid << 32 | fd)] = ctypes.c_uint64(kind)
                self.bump_epoch()  # (the threads' cached descriptor kinds)
                self._events.append(
                    Event(ts, pid, pid, "open", "adopted", [fd, flags, pos, dev, ino, -100, serial], info.comm, path)
                )

    def _ring_reader(self):
        """The events ring read from its mapping (ringread.py), or None: bcc's callback then."""
        from .ringread import RingReader, Unavailable

        if os.environ.get("GDSDIAG_RING_MMAP", "1") == "0":
            return None
        t = self.b["events"]
        try:
            return RingReader(t.map_fd, int(t.max_entries), EVENT_SIZE)
        except Unavailable as e:
            self.failed.append(f"events ring read through bcc's callback ({e})")
            return None

    def _keep(self, blob: bytes, n: int, bounded: bool = True) -> None:
        """Hold N records undecoded. BOUNDED (bcc's callback, which cannot leave them in the ring):
        past RAW_BACKLOG they are dropped and counted per process (tally_records)."""
        room = RAW_BACKLOG - self._raw_n if bounded else n
        if n > room:  # (~100 MiB waiting: dropped as the full ring would, and counted per process)
            self._backlog_lost += n - max(room, 0)
            n = max(room, 0)
            tally_records(blob[n * REC_STRIDE :], self.backlog_lost_by_pid, self.exits_counted)
            blob = blob[: n * REC_STRIDE]
        if n:
            self._raw.append((blob, n))
            self._raw_n += n

    def _on_event(self, ctx, data, size) -> None:
        # bcc's callback (where the ring is not read from its mapping): keep the bytes, as they lie in
        # the ring; poll() decodes them all at once
        rec = ctypes.string_at(data, min(size, EVENT_SIZE))
        self._keep(bytes(8) + rec.ljust(REC_STRIDE - 8, b"\0"), 1)

    def _read_events(self, force: bool = False) -> None:
        """The events ring's records into the backlog; with RAW_BACKLOG waiting, left in the ring
        (the kernel counts what no longer fits: lost I/O per process and file) unless FORCE."""
        if self._rr is not None and (force or self._raw_n < RAW_BACKLOG):
            blob, n = self._rr.read()
            if n:
                self._keep(blob, n, bounded=False)

    def drop_raw_beyond(self, keep: int, tally: Unclassified | None = None) -> int:
        """Keep the KEEP oldest records not yet decoded (the ring's too), drop the rest; how many went
        (and, into TALLY, per process: tally_records; the cuFile exits among them: exits_counted)."""
        self.drain(force=True)
        n = self._raw_n - keep
        if n <= 0:
            return 0
        drop = n
        while drop and self._raw:
            blob, m = self._raw[-1]
            if m <= drop:
                self._raw.pop()
                drop -= m
                if tally is not None:
                    tally_records(blob, tally, self.exits_counted)
            else:
                self._raw[-1] = (blob[: (m - drop) * REC_STRIDE], m - drop)
                if tally is not None:
                    tally_records(blob[(m - drop) * REC_STRIDE :], tally, self.exits_counted)
                drop = 0
        self._raw_n = keep
        return n

    def drain(self, force: bool = False) -> None:
        """Move what the kernel has written into memory now, without waiting and without decoding
        (the live loop calls it between chunks of classification, so bursts do not overflow the ring);
        the events ring not past RAW_BACKLOG unless FORCE (_read_events)."""
        self._read_events(force)
        self.b.ring_buffer_consume()

    def pair_whole_calls(self, busy) -> None:
        """From now on, whole sync cuFile calls are paired straight from the ring's records
        (wholecalls.py) and taken with ``take_whole`` instead of being decoded into events. BUSY()
        gives what the classifier must see itself (Classifier.whole_gate)."""
        from .wholecalls import WholeCalls

        self._whole, self._whole_busy = WholeCalls(REC_STRIDE), busy

    def _whole_gate(self, cut: int):
        """(processes whose records go to the event path, each with the time from which: pid -> the
        oldest event of it held here, 0 for all of them; threads whose call it holds open, once what
        it holds is fed; which processes may have bounce pairs taken, or None; the processes' times
        for bounce pairs). A record older than an event of its process held here (to be fed in time
        order) is the event path's; one younger is not: an open from the other ring, seconds younger
        than the records a backlogged trace is looking at, kept a real stream from being paired.
        Held cuFileRead/Write enters and exits of a thread commute with other threads' whole calls
        (no evidence between them), so they only decide whether the thread's next exit is the event
        path's; a bounce pair commutes with nothing of its own process, and a copy held here up to
        CUT (the newest record handed out) is one the event path sees before them."""
        assert self._whole_busy is not None  # (set with _whole: pair_whole_calls)
        vetoed, opened, bounce_ok = self._whole_busy()
        veto = dict.fromkeys(vetoed, 0)
        calls: dict[int, int] = {}  # pid -> its oldest cuFile enter or exit held here
        depth = {tid: n for tid, (_, n) in opened.items()}
        for e in (*self._held, *self._events):
            if e.name in _SYNC_IO and (e.kind == "api_enter" or e.kind == "api_exit"):
                n = depth.get(e.tid, 0)
                depth[e.tid] = n + 1 if e.kind == "api_enter" else max(n - 1, 0)
                opened.setdefault(e.tid, (e.pid, 0))
                if e.ts < calls.get(e.pid, 1 << 64):
                    calls[e.pid] = e.ts
            elif e.ts < veto.get(e.pid, 1 << 64):
                veto[e.pid] = e.ts
        open_tids = []
        for tid, n in depth.items():
            if n == 1:
                open_tids.append(tid)
            elif n > 1:  # (calls nested on one thread: a lost exit; the event path sorts it out)
                veto[opened[tid][0]] = 0
        if bounce_ok is None:
            return veto, open_tids, None, veto
        bveto = dict(veto)
        for pid, ts in calls.items():
            if ts < bveto.get(pid, 1 << 64):
                bveto[pid] = ts
        theirs = [
            e.pid
            for e in (*self._held, *self._events)
            if e.ts <= cut and e.kind == "api_enter" and e.name == "cuMemcpy"
        ]
        if not theirs:
            return veto, open_tids, bounce_ok, bveto

        def held_aware(pids: list[int], copiers: list[int], leads: list) -> set[int]:
            return bounce_ok(pids, [*copiers, *theirs], leads)

        return veto, open_tids, held_aware, bveto

    def take_whole(self) -> list:
        """The whole calls paired since the last call (for Classifier.feed_whole)."""
        pairs, self._whole_pairs = self._whole_pairs, []
        return pairs

    def take_bounce(self) -> list:
        """The bounce pairs taken since the last call (for Classifier.feed_whole's BOUNCES)."""
        pairs, self._bounce_pairs = self._bounce_pairs, []
        return pairs

    @property
    def whole_records(self) -> int:
        """Records handed out as whole calls instead of events."""
        return self._whole.taken if self._whole is not None else 0

    def _decode(self, limit: int | None = None, final: bool = False) -> int | None:
        """The records taken since the last poll (the oldest LIMIT of them), decoded in one
        struct.iter_unpack pass over their bytes (no per-field ctypes access); the timestamp of the
        last one decoded when records are left undecoded, else None."""
        raw = self._raw
        if not raw and (self._whole is None or not (self._whole.carry or self._whole.unseen)):
            return None
        if limit is not None and self._raw_n > limit:
            take, got, i = [], 0, 0
            while got < limit:
                blob, n = raw[i]
                if got + n <= limit:
                    take.append(blob)
                    got += n
                    i += 1
                else:
                    k = limit - got
                    take.append(blob[: k * REC_STRIDE])
                    raw[i] = (blob[k * REC_STRIDE :], n - k)
                    got = limit
            del raw[:i]
            self._raw_n -= got
        else:
            take = [blob for blob, _ in raw]
            self._raw, self._raw_n = [], 0
        buf = b"".join(take)
        partial_ts = _REC_TS.unpack_from(buf, len(buf) - REC_STRIDE)[0] if self._raw else None
        if self._whole is not None:
            now = self.clock()
            cut = now - self.REORDER_NS
            if partial_ts is not None:
                cut = min(cut, partial_ts - self.REORDER_NS)
            buf, pairs, bounces = self._whole.split(buf, cut, self._whole_gate, final, now)
            if pairs:
                self._whole_pairs.extend(pairs)
            if bounces:
                self._bounce_pairs.extend(bounces)
        comms = self._comms
        out = self._events
        usdt = self.usdt_names
        names = self._names
        for ts, pid, tid, typ, rid, a0, a1, a2, a3, a4, a5, a6, craw in REC_STRUCT.iter_unpack(buf):
            # one lookup names the record (its kind and name, by type and id: _record_name)
            known = names.get((typ << 32) | rid)
            if known is None:
                known = names[(typ << 32) | rid] = _record_name(typ, rid)
            kind, name, how = known
            comm = comms.get(craw)
            if comm is None:
                comm = comms[craw] = craw.split(b"\0", 1)[0].decode(errors="replace")
            if how == 0:
                out.append(Event(ts, pid, tid, kind, name, [a0, a1, a2, a3, a4, a5, a6], comm, None))
            elif how == _USDT:  # named by the sites attached so far; a6 is its argument count
                args = [a0, a1, a2, a3, a4, a5][: min(a6, 6)] if a6 else []
                out.append(Event(ts, pid, tid, kind, usdt.get(rid, f"usdt#{rid}"), args, comm, None))
            elif how == _FORK:  # (a2 1: the child is a thread of the parent, as /proc has it now)
                out.append(Event(ts, pid, tid, kind, name, [a0, a1, _is_thread(a0, a1), a3, a4, a5, a6], comm, None))
            else:  # _HANDLE_REGISTER (rare): the fd's file as it is now
                out.append(Event(ts, pid, tid, kind, name, [a0, a1, a2, a3, a4, a5, a6], comm, _fd_path(pid, a1)))
        return partial_ts

    def _on_open(self, ctx, data, size) -> None:
        r = _OpenRecord(*OPEN_STRUCT.unpack_from(ctypes.string_at(data, OPEN_STRUCT.size)))
        path = r.path.split(b"\0", 1)[0].decode(errors="replace")
        if r.fd == OPEN_EXEC:
            comm = r.comm.split(b"\0", 1)[0].decode(errors="replace")
            self._events.append(Event(r.ts, r.pid, r.tid, "proc", "exec", [], comm, path))
            return
        if r.fd == OPEN_STDERR:
            self._on_stderr(r)
            return
        path = _absolute(path, r.pid, r.dfd)
        if r.fd in (OPEN_RENAME_FROM, OPEN_RENAME_TO):
            self._on_rename(r, path)
            return
        dev = ino = 0
        if path.startswith(("/proc/self/", "/proc/thread-self/")):
            path_here = f"/proc/{r.pid}/" + path.split("/", 3)[3]  # their /proc/self, not ours
        else:
            path_here = path
        # The inode names the file in page-cache fill events (mmap reads), and registering it lets
        # the kernel send them. Only for an open the kernel counted as data (it gave it a serial): a
        # named directory (CUDA's and libcufile's start-up walk thousands, a stat and a map update
        # each) and a CUDA library (named so its copy can be probed: libcublasLt's 259 MB came as
        # 66k fill events from a cold page cache) have none. Not for a path the classifier never
        # counts as data either, nor one relative to a directory fd (the classifier joins it).
        if r.serial and path.startswith("/") and not not_data(path) and not r.flags & O_TMPFILE:
            try:
                st = os.stat(path_here)
                dev, ino = (os.major(st.st_dev) << 20) | os.minor(st.st_dev), st.st_ino
                self.add_data_inode(dev, ino)
            except OSError:
                pass
        self._events.append(
            Event(r.ts, r.pid, r.tid, "open", "openat", [r.fd, r.flags, 0, dev, ino, r.dfd, r.serial], "", path)
        )

    def _on_stderr(self, r) -> None:
        """A part of a write to stderr (probes/cufile_trace.c stderr_enter), in order per process:
        a "said" event (path: the line) for each line it completes that names the data path
        (said.StderrLines). Nothing else the program printed is kept or recorded."""
        if r.flags <= 0:
            return
        n = min(len(r.path), r.flags - r.serial * len(r.path))
        if n <= 0:
            return
        if self._said is None:
            return
        for line in self._said.feed(r.pid, r.path[:n].decode(errors="replace")):
            self._events.append(Event(r.ts, r.pid, r.tid, "said", "stderr", [], "", line))

    def _on_rename(self, r, path: str) -> None:
        """The two halves of a rename (probes/cufile_trace.c rename_exit), one after the other from
        one thread: one "rename" event, its path "OLD\\0NEW" (no path holds a NUL; the recording's
        path field stays one string), args [old dfd, new dfd, flags]. A half without its other half
        (the ring was full for it) is dropped."""
        if r.fd == OPEN_RENAME_FROM:
            self._rename_from[r.tid] = (path, r.dfd)
            return
        old = self._rename_from.pop(r.tid, None)
        if old is None:
            return
        name = RENAME_NAMES.get(r.serial, "rename")
        self._events.append(
            Event(r.ts, r.pid, r.tid, "rename", name, [old[1], r.dfd, r.flags], "", old[0] + "\0" + path)
        )

    def add_data_inode(self, dev: int, ino: int) -> None:
        """Page-cache fills of this file count (the kernel drops those of other files)."""
        if ino:
            k = self.b["data_inodes"].Key(dev, ino)
            self.b["data_inodes"][k] = ctypes.c_uint8(1)

    def _on_kevent(self, cpu, data, size) -> None:
        r = self.kb["kevents"].event(data)
        self._events.append(
            Event(
                int(r.ts),
                int(r.pid),
                int(r.tid),
                "kprobe",
                KPROBE_NAMES.get(r.id, str(r.id)),
                [int(r.a[0])],
                r.comm.decode(errors="replace"),
            )
        )

    def _on_lost(self, n) -> None:
        self._perf_lost += n

    REORDER_NS = 50_000_000
    clock = staticmethod(time.monotonic_ns)  # the probes' clock (bpf_ktime_get_ns: CLOCK_MONOTONIC)
    LOST_READ_NS = 200_000_000  # the kernel's lost-event counter read at most this often (and at the end)
    _said: StderrLines | None = None  # (set by __init__; a harness that builds a bare reader has none)
    complete_ns = 0  # poll(): the time (CLOCK_MONOTONIC ns, the probes' clock) up to which every event was returned
    # records decoded per poll: a backlog is worked off in steps the loop can stop between (16k: ~0.05 s
    # here, so a signal waits no longer than that for the step to end)
    DECODE_MAX = 16_384
    # fewer records than this in the events ring: the poll waits up to BATCH_WAIT_MS for more
    BATCH_RECORDS = 2_048
    BATCH_WAIT_MS = 5

    def poll(self, timeout_ms: int = 100, final: bool = False) -> list[Event]:
        """Events in time order. Two rings (events, opens) are read separately and the kernel wakes
        a reader only now and then: an open can reach us after the write that follows it. So every
        ring is drained, and events younger than REORDER_NS stay back until the next poll (all of
        them with final=True). A backlog is decoded DECODE_MAX records a poll; events are then held
        back relative to the last record decoded, as the ones not decoded yet are younger."""
        # (bcc's poll waits on the opens ring only when the events ring is read from its mapping:
        # it is not waited for while the events ring has a batch of records; a few records wait
        # BATCH_WAIT_MS for more: a pass of the live loop costs about the same for ten records as
        # for a thousand, and a stream of 20-30k a second made it pass for every few dozen)
        wait = timeout_ms
        if self._rr is not None and self._rr.pending():
            few = not final and not self._raw_n and self._rr.pending_records() < self.BATCH_RECORDS
            wait = min(timeout_ms, self.BATCH_WAIT_MS) if few else 0
        self.b.ring_buffer_poll(timeout=wait)
        self.drain(force=final)
        partial_ts = self._decode(None if final else self.DECODE_MAX, final)
        now = self.clock()
        if final and self._said is not None:  # (a last line with no newline)
            for pid in self._said.pids():
                for line in self._said.flush(pid):
                    self._events.append(Event(now, pid, pid, "said", "stderr", [], "", line))
        if final or now - self._lost_read_ns >= self.LOST_READ_NS:
            # (a map lookup through bcc and ctypes: a few times a second, and at the end)
            self._lost_read_ns = now
            try:
                self.lost = int(self.b["drops"][0].value) + self._perf_lost + self._backlog_lost
            except (KeyError, OSError) as e:  # (the maps are gone: keep the last count, say so once)
                if not any(f.startswith("lost-event counter") for f in self.failed):
                    self.failed.append(f"lost-event counter unreadable: {e}")
        if self.kb is not None:
            self.kb.perf_buffer_poll(timeout=0)
        evs, ts = self._in_order(self._events)
        self._events = []
        if final:
            self._held, self._held_ts = [], []
            return evs
        cut = now - self.REORDER_NS
        if partial_ts is not None:
            cut = min(cut, partial_ts - self.REORDER_NS)
        if self._whole is not None:
            held = self._whole.hold_ts()
            if held is not None:  # (records waiting there, not looked at yet: not in this poll)
                cut = min(cut, held - 1)
        i = bisect.bisect_right(ts, cut)
        self._held, self._held_ts = evs[i:], ts[i:]
        # every event up to CUT is in what this poll returns: the classifier's clock may go that far
        # though the traced program is quiet (its holds then end on time, not at its next event)
        self.complete_ns = cut
        return evs[:i]

    def _in_order(self, new: list[Event]) -> tuple[list[Event], list[int]]:
        """The events held back by the last poll and NEW, in time order, and their timestamps. The
        held ones are in order already and, but for the few younger than NEW's oldest (another CPU's
        record, a syscall stamped at its enter), older than every new one: only those few are sorted
        again with NEW. Re-sorting everything held (REORDER_NS of the stream) at every poll was a
        tenth of the live loop's CPU on the GPU machine at 35k records/s."""
        new.sort(key=_TS)
        held, held_ts = self._held, self._held_ts
        if not held:
            return new, list(map(_TS, new))
        if not new:
            return held, held_ts
        k = bisect.bisect_right(held_ts, new[0].ts)
        if k == len(held):
            return held + new, held_ts + list(map(_TS, new))
        tail = held[k:] + new
        tail.sort(key=_TS)  # (stable: a held event stays before a new one of the same time)
        return held[:k] + tail, held_ts[:k] + list(map(_TS, tail))

    def counted_host_io(self) -> list[Event]:
        """The host I/O the kernel counted instead of sending (hostagg), one "counted" event per
        (process, open, syscall, size class, lost): args [serial, size class, count, bytes, errors,
        latency ns, first ts, last ts, lost]; the reader names the file by the open's serial. lost 1:
        I/Os of a process that may copy to a GPU whose records the full ring dropped (no route);
        those of a process without CUDA are HOST either way and counted with lost 0."""
        out: list[Event] = []
        try:
            items = _all_items(self.b["hostagg"])
        except (KeyError, OSError) as e:  # never silently: the counted host I/O would be missing
            self.failed.append(f"host-I/O counters unreadable (their I/O is not in the totals): {e}")
            return out
        for k, v in items:
            out.append(
                Event(
                    int(v.last_ts),
                    int(k.tgid),
                    int(k.tgid),
                    "counted",
                    SYS_NAMES.get(int(k.id), str(k.id)),
                    [
                        int(k.serial),
                        int(k.bucket),
                        int(v.count),
                        int(v.bytes),
                        int(v.errors),
                        int(v.lat_ns),
                        int(v.first_ts),
                        int(v.last_ts),
                        int(k.lost),
                    ],
                )
            )
        out.sort(key=_TS)
        return out

    def close(self) -> None:
        """Detach every probe (all at once: detach.py) and free the maps; safe to call twice."""
        from .detach import detach_all

        bpfs = [getattr(self, "b", None), getattr(self, "kb", None)]
        um = getattr(self, "_um", None)
        if getattr(self, "_rr", None) is not None:
            self._rr.close()
            self._rr = None
        self.b = self.kb = self._um = None
        self.timing.update(detach_all(bpfs, um))


class _NoRings:
    """Probes.offline's stand-in for bcc's BPF object: no rings to poll, no maps to read."""

    def ring_buffer_poll(self, timeout: int = 0) -> None:
        pass

    def ring_buffer_consume(self) -> None:
        pass

    def __getitem__(self, name: str):
        raise KeyError(name)


def cuda_copy_handler(sym: str) -> str | None:
    """Which handler reads a cuMemcpy* entry point's host side: HtoD (src = arg 2), DtoH (dst =
    arg 1), unified cuMemcpy/cuMemcpyAsync (dst, src: the host side is found by address), the 2D/3D
    descriptor forms, and the batch form (arrays of dst, src, size)."""
    import re

    if re.fullmatch(r"cuMemcpy2D(Async|Unaligned)?_v2(_ptds|_ptsz)?", sym):
        return "memcpy_2d"  # (the unsuffixed cuMemcpy2D is the legacy 32-bit-field layout)
    if re.fullmatch(r"cuMemcpy3D(Async)?_v2(_ptds|_ptsz)?", sym):
        return "memcpy_3d"
    if re.fullmatch(r"cuMemcpyBatchAsync(_v2)?(_ptsz)?", sym):
        return "memcpy_batch"  # kvikio's POSIX path (CUDA >= 12.8); dsts, srcs, sizes, count
    m = re.fullmatch(r"cuMemcpy(HtoD|DtoH|)(Async)?(_v2)?(_ptds|_ptsz)?", sym)
    if not m:
        return None
    return {"HtoD": "memcpy_htod", "DtoH": "memcpy_dtoh", "": "memcpy_any"}[m.group(1)]


def _absolute(path: str, pid: int, dfd: int) -> str:
    """PATH relative to the cwd (DFD -100) or to a directory fd (directory fds are not traced: they
    carry no data), as the process has them when the reader sees the call; an absolute or empty PATH
    as it is."""
    if not path or path.startswith("/"):
        return path
    where = "cwd" if dfd == -100 else f"fd/{dfd}"
    try:
        return os.path.join(os.readlink(f"/proc/{pid}/{where}"), path)
    except OSError:
        return path


def _is_thread(parent: int, child: int) -> int:
    """1 if CHILD (a task sched_process_fork announced) is a thread of process PARENT: its tid is
    in PARENT's task directory. The tracepoint does not say (clone's CLONE_THREAD is not among its
    fields, and the probes read no task struct); a thread gone before the reader looks stays 0, as
    every fork was before (listed as a process of its own)."""
    return 1 if child != parent and os.path.exists(f"/proc/{parent}/task/{child}") else 0


def _fd_path(pid: int, fd: int) -> str | None:
    """What /proc says a descriptor names now: the fallback for one opened before the trace or whose
    open event was lost (the classifier prefers the traced descriptor table)."""
    try:
        p = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    return p if p.startswith("/") else None


def _same_inode(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _find_libcuda() -> str | None:
    for p in (
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib64/libcuda.so.1",
        "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
        "/usr/local/nvidia/lib64/libcuda.so.1",
    ):
        if os.path.exists(p):
            return p
    name = ctypes.util.find_library("cuda")
    if name:
        for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
            if os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name)
    return None
