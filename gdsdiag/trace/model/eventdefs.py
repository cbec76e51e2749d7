"""The one table of the trace probes' event ids, record layout and constants.

probes/cufile_trace.c and probes/nvfs_kprobes.c do not define these numbers themselves: bpf.py puts
the ``#define``s and ``struct event_t`` generated here in front of the program text (``c_defines``)
when it loads them, and the decoder (bpf.py, events.py) reads records with the same table — so
the kernel and Python cannot disagree. ``gdsdiag trace --ebpf`` prints the final program.
"""

from __future__ import annotations

import struct


def _table(text: str) -> tuple:
    """Rows of "C_NAME VALUE [decoder name]" (a "#" starts a comment): (name, value[, decoder name])."""
    rows = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            rows.append((words[0], int(words[1]), *words[2:3]))
    return tuple(rows)


# record kinds (event_t.type), with the Event.kind the decoder gives them
KINDS = _table("""
    EV_API_ENTER 1 api_enter
    EV_API_EXIT 2 api_exit
    EV_USDT 3 usdt
    EV_SYS_ENTER 4 sys_enter        # not sent: a syscall is one record, at its exit
    EV_SYS_EXIT 5 sys_exit
    EV_BLK_ISSUE 6 blk_issue
    EV_BLK_DONE 7 blk_done
    EV_HANDLE 8 handle
    EV_BATCH_REQ 9 batch_req
    EV_KPROBE 10 kprobe             # nvfs_kprobes.c's records
    EV_PROC 11 proc                 # process tree: PROC_* ids
    EV_FD 12 fd                     # descriptor table: FDEV_* ids
    EV_PAGES 13 pages               # page-cache fill outside read syscalls: a0 dev, a1 ino, a2 index, a3 pages
    EV_MAJFLT 14 majflt             # a major page fault of a process that mapped a data file: a0 the address
""")
# cuFile API (and CUDA copy) ids of EV_API_ENTER/EXIT, EV_HANDLE, EV_BATCH_REQ
API = _table("""
    API_READ 1 cuFileRead
    API_WRITE 2 cuFileWrite
    API_READ_ASYNC 3 cuFileReadAsync
    API_WRITE_ASYNC 4 cuFileWriteAsync
    API_BATCH_SUBMIT 5 cuFileBatchIOSubmit
    API_BATCH_STATUS 6 cuFileBatchIOGetStatus
    API_HANDLE_REGISTER 7 cuFileHandleRegister
    API_HANDLE_DEREGISTER 8 cuFileHandleDeregister
    API_BUF_REGISTER 9 cuFileBufRegister
    API_DRIVER_OPEN 10 cuFileDriverOpen
    API_GET_VERSION 11 cuFileGetVersion
    API_MEMCPY 12 cuMemcpy
""")
# syscall ids of EV_SYS_EXIT (and of the in-kernel host-I/O counters)
SYSCALLS = _table("""
    SYS_PREAD64 1 pread64
    SYS_PWRITE64 2 pwrite64
    SYS_PREADV 3 preadv
    SYS_PWRITEV 4 pwritev
    SYS_PREADV2 5 preadv2
    SYS_PWRITEV2 6 pwritev2
    SYS_IOCTL 7 ioctl
    SYS_IO_SUBMIT 8 io_submit
    SYS_IO_URING_ENTER 9 io_uring_enter
    SYS_READ 10 read
    SYS_WRITE 11 write
    SYS_READV 12 readv
    SYS_WRITEV 13 writev
    SYS_COPY_FILE_RANGE 14 copy_file_range
    SYS_SENDFILE 15 sendfile
    SYS_SPLICE 16 splice
    SYS_URING 17 io_uring           # one io_uring request, joined from its submit/file_get/complete tracepoints
    SYS_AIO 18 aio                  # one iocb of io_submit (a4: IOCB_CMD_*)
    SYS_URING_RW 19 io_uring_rw     # SYS_URING with the buffer address and the ring's fd (a1, a2: probe's uring_t)
    SYS_URING_REGISTER 20 io_uring_register  # part of a registered file or buffer table (URING_REG_*)
""")
# fd-table syscalls: kept from enter to exit like the others, sent as EV_FD (>= SYS_DUP: bookkeeping)
FD_SYSCALLS = _table("""
    SYS_DUP 30
    SYS_LSEEK 31
    SYS_MMAP 32
""")
# ids of EV_FD: close (a0 fd), dup (a0 old, a1 new, a2 cloexec), lseek (a0 fd, a1 new position),
# mmap (a0 fd, a1 address, a2 length, a3 offset)
FD_EVENTS = _table("""
    FDEV_CLOSE 1 close
    FDEV_DUP 2 dup
    FDEV_LSEEK 3 lseek
    FDEV_UNNAMED_OPEN 5 unnamed_open    # (a0 fd) in version-2 recordings only
    FDEV_MMAP 6 mmap
""")
# ids of EV_PROC: fork (a0 parent, a1 child; a2 the reader's: 1 a thread), exec (from the opens ring,
# with the program), exit (a0 pid), thread_exit (a0 pid, a1 thread id)
PROC_EVENTS = _table("""
    PROC_FORK 1 fork
    PROC_EXEC 2 exec
    PROC_EXIT 3 exit
    PROC_THREAD_EXIT 4 thread_exit  # (a0 its process, a1 the thread): a thread fork announced ended
""")
# ids of nvfs_kprobes.c's EV_KPROBE records
KPROBE_EVENTS = _table("""
    K_MAP_SG 1 nvfs_blk_rq_map_sg
    K_DMA_MAP_SG 2 nvfs_dma_map_sg_attrs
    K_ITER_START 3 nvfs_blk_rq_dma_map_iter_start
    K_GET_DMA 4 nvfs_get_dma
    K_P2PDMA_SEGMENT 5 pci_p2pdma_map_segment
    K_IO_START 6 nvfs_io_start_op
""")
# what the kernel's fdinfo map knows of a descriptor (value: kind | open serial << 8)
FD_KINDS = _table("""
    FD_NODATA 1         # libraries, Python sources, pipes, sockets…: nothing is sent for it
    FD_NAMEDDIR 2       # a directory opened by absolute path: its close and dups are sent
    FD_PSEUDO 3         # /sys, /proc, /dev, or opened relative to such a directory
    FD_DATA 4           # a data file the reader knows (its open's serial in the upper bits)
""")
# what an open_t record is when its fd is negative: an exec (the new program), or one half of a
# successful rename (from, to: the path as the call gave it, dfd its directory fd, flags the call's,
# serial the call's RN_* id); both halves come from one exit, one after the other
OPEN_KINDS = _table("""
    OPEN_EXEC -2
    OPEN_RENAME_FROM -3
    OPEN_RENAME_TO -4
    OPEN_STDERR -5          # a write to descriptor 2: path = up to 256 bytes of it, flags its length, serial the part
""")
RENAMES = _table("""
    RN_RENAME 1 rename
    RN_RENAMEAT 2 renameat
    RN_RENAMEAT2 3 renameat2
    RN_LINKAT 4 linkat               # a link of a descriptor (AT_EMPTY_PATH, /proc/self/fd/N): an O_TMPFILE named
""")
CONSTANTS = _table("""
    EVENTS_RING_PAGES 4096      # 16 MiB: ~160k 104-byte records between two drains
    OPENS_RING_PAGES 4096       # 16 MiB: ~51k opens/execs (only data, named directories, CUDA libraries)
    BATCH_MAX 8                 # cuFileBatchIOSubmit requests sent per call
    AIO_MAX 8                   # io_submit iocbs sent per call
    SYS_SLOTS 65536             # per-thread slots (syscall arguments, cached state), by thread id's low bits
    STDERR_WRITES 256           # writes to stderr sent per traced process (the first ones: start-up says why)
    STDERR_PARTS 2              # 256-byte parts sent of each
    URING_REG_RECORDS 64        # records sent per io_uring_register: 6 files or 1 buffer each (384 files, 64 buffers)
""")
BATCH_MAX = dict(CONSTANTS)["BATCH_MAX"]
AIO_MAX = dict(CONSTANTS)["AIO_MAX"]
# struct event_t, the record of the events ring (and kev_t of nvfs_kprobes.c): field, C type,
# count, struct format
EVENT_FIELDS = (
    ("ts", "u64", 1, "Q"),
    ("pid", "u32", 1, "I"),
    ("tid", "u32", 1, "I"),
    ("type", "u32", 1, "I"),
    ("id", "u32", 1, "I"),
    ("a", "s64", 7, "q"),
    ("comm", "char", 16, "s"),
)
# struct open_t, the record of the opens ring: an open (fd >= 0) or an exec (fd -2, path = the program)
OPEN_FIELDS = (
    ("ts", "u64", 1, "Q"),
    ("pid", "u32", 1, "I"),
    ("tid", "u32", 1, "I"),
    ("fd", "s64", 1, "q"),
    ("flags", "s64", 1, "q"),
    ("dfd", "s64", 1, "q"),  # openat's directory fd (-100: the cwd)
    ("serial", "s64", 1, "q"),  # the open's number (FD_DATA), 0 for others
    ("comm", "char", 16, "s"),
    ("path", "char", 256, "s"),
)


def _struct(fields) -> struct.Struct:
    return struct.Struct("<" + "".join(f"{n if n > 1 else ''}{f}" for _, _, n, f in fields))


EVENT_STRUCT = _struct(EVENT_FIELDS)
EVENT_SIZE = EVENT_STRUCT.size
OPEN_STRUCT = _struct(OPEN_FIELDS)

ALL_IDS = KINDS + API + SYSCALLS + FD_EVENTS + PROC_EVENTS + KPROBE_EVENTS
ALL_NUMBERS = tuple((row[0], row[1]) for row in ALL_IDS + FD_SYSCALLS + FD_KINDS + CONSTANTS + OPEN_KINDS + RENAMES)


def names(table) -> dict[int, str]:
    """id -> name of one table (API, SYSCALLS, …), as the decoder names records."""
    return {value: name for _, value, name in table}


def c_struct(name: str = "event_t", fields=EVENT_FIELDS) -> str:
    body = " ".join(f"{ctype} {f}{f'[{n}]' if n > 1 else ''};" for f, ctype, n, _ in fields)
    return f"struct {name} {{ {body} }};\n"


def c_defines(struct_name: str = "event_t", opens: bool = True) -> str:
    """The #defines and the record structs, for the top of a probe program."""
    lines = ["/* generated from gdsdiag/trace/model/eventdefs.py: the decoder uses the same table */"]
    lines += [f"#define {name} {value}" for name, value in ALL_NUMBERS]
    return "\n".join(lines) + "\n" + c_struct(struct_name) + (c_struct("open_t", OPEN_FIELDS) if opens else "")
