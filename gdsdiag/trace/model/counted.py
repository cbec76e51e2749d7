"""Host I/O the kernel counted instead of sending one by one (probes/cufile_trace.c hostagg).

A read/write/pread/pwrite (or v-form) on a data file, by a process that has opened no CUDA library
and is not inside a cuFile call, cannot become DRAM_BOUNCE in that process: no CUDA copy can follow
it in that process image. The kernel adds it to a counter per (process, open, syscall, size class),
and the trace reads the counters at its end as "counted" events (live and in --record files). This
module names each counter's file from the open events (their serial, args[6]) and folds the counters
into the summary as HOST I/O: every I/O is still counted, with its bytes; offsets are not kept
(--per-io sends every I/O with its offset). Another process may still copy those bytes to a GPU (a
spawned worker's shared memory, `dd` into a pipe): where a process of the tree copied host memory no
traced read explains, a read counter is UNKNOWN instead (Classifier.copied_elsewhere).

The kernel also counts here the reads and writes of a data file whose per-I/O record it could not
send (the events ring full, issue 43): of a process without CUDA they are HOST as above; of one that
may copy to a GPU they are "lost" counters (args[8]), UNKNOWN with no per-I/O detail, so the totals
per process and per file stay exact under any load.
"""

from __future__ import annotations

from ...routes import Route
from ...units import size_text
from .events import Event, not_data
from .evidence import HOST_RULE
from .records import MIN_APP_IO

# (evidence.HOST_RULES: the rows a counted I/O takes its route from)
_NO_COPY, _ELSEWHERE, _LOST = HOST_RULE["no-copy"], HOST_RULE["elsewhere"], HOST_RULE["lost-in-kernel"]
READS = {"pread64", "preadv", "preadv2", "read", "readv"}
SCAN_MAX = 5_000_000  # (classify.RENAME_WORK_MAX: the same bound for the counters' opens)
LOST_WHY = (
    "no per-I/O detail: the events ring was full, so the kernel counted these I/Os with their file "
    "and bytes instead of sending each (a process that may copy to a GPU: their route is not known)"
)


def size_class(bucket: int) -> str:
    """The probe's size class b: [2^(b-1), 2^b) bytes (so 4 KiB is 13, shown "4 KiB-8 KiB", the one
    size notation of every table: units.size_text), 0 for none."""
    if bucket <= 0:
        return "0"
    lo = 1 << (bucket - 1)
    return f"{size_text(lo)}-{size_text(2 * lo)}"


# below this the reader drops host I/O as "small" (records.MIN_APP_IO): classes up to 2 KiB-4 KiB
SMALL_BUCKET = MIN_APP_IO.bit_length() - 1


class CountedIo:
    """Feed it every event (after the classifier, which resolves open paths); ``rows()`` at the end."""

    def __init__(self) -> None:
        self.paths: dict[int, str | None] = {}  # open serial -> path (its file's name now)
        self.was: dict[int, str] = {}  # open serial -> the path it was opened by, where renamed since
        self.serials: dict[str, list[int]] = {}  # path -> the opens of it (a rename of a file: no scan)
        self.scanned = 0  # opens walked for renames of directories, at most SCAN_MAX (a stranger's recording)
        self.comms: dict[int, str] = {}
        self.counted: list[Event] = []

    def feed(self, e: Event) -> None:
        if e.kind == "open" and len(e.args) > 6 and e.args[6]:
            self.paths[e.args[6]] = e.path
            if e.path:
                self.serials.setdefault(e.path, []).append(e.args[6])
        elif e.kind == "rename" and e.path and self.paths:
            old, _, new = e.path.partition("\0")
            if e.name == "renameat2" and len(e.args) > 2 and e.args[2] & 2:  # RENAME_EXCHANGE: the names swap
                self._rename(old, old + "\0exchange")
                self._rename(new, old)
                self._rename(old + "\0exchange", new)
            else:
                self._rename(old, new)
        elif e.kind == "proc" and e.comm:
            self.comms[e.pid] = e.comm
        elif e.kind == "counted":
            self.counted.append(e)

    def _rename(self, old: str, new: str) -> None:
        """The files opened as OLD (or under it) are NEW from now on (the classifier resolved both:
        Classifier._on_rename). A counter's I/O all came before its row is read: its file's last
        name is the one to show."""
        from .procstate import moved as _moved

        if not old or not new:
            return
        exact = self.serials.pop(old, None)
        # (a file: its opens by name; else maybe a directory: every path under it)
        if exact is None and self.scanned + len(self.paths) > SCAN_MAX:
            return
        if exact is None:
            self.scanned += len(self.paths)
        touched = exact if exact is not None else [s for s, p in self.paths.items() if p and p.startswith(old + "/")]
        for serial in touched:
            path = self.paths.get(serial)
            moved = _moved(path, old, new) if path else None
            if path and moved is not None:
                self.was.setdefault(serial, path)
                self.paths[serial] = moved
                self.serials.setdefault(moved, []).append(serial)

    def rows(self, path_ok, elsewhere=None) -> list[dict]:
        """One row per counter whose file is data under the path filter (path_ok(path) -> bool).
        Its route is HOST, or UNKNOWN where ELSEWHERE(pid, first I/O's time, path, bytes, the
        processes whose writes were counted) gives a reason or its records were lost (row "lost":
        True, why LOST_WHY)
        (Classifier.copied_elsewhere: its job copied host memory to a GPU that no traced read
        explained, after this I/O began: the bytes may have gone there through shared memory)."""
        out = []
        writers = (
            {
                e.pid
                for e in self.counted
                if e.name not in READS and self.paths.get(e.args[0]) is not None and not _lost(e)
            }
            if elsewhere is not None
            else set()
        )
        for e in self.counted:
            serial, bucket, count, nbytes, errors, lat_ns = (list(e.args) + [0] * 6)[:6]
            path = self.paths.get(serial)
            if bucket <= SMALL_BUCKET:
                continue  # headers and configs, as the reader drops them when sent one by one
            if path is None or not_data(path) or not path_ok(path):
                continue
            op = "read" if e.name in READS else "write"
            first = e.args[6] if len(e.args) > 6 and e.args[6] else e.ts
            lost = _lost(e)
            why = (
                LOST_WHY
                if lost
                else elsewhere(e.pid, first, path, nbytes, writers)
                if elsewhere is not None and op == "read"
                else None
            )
            row = {
                "pid": e.pid,
                "comm": self.comms.get(e.pid, e.comm),
                "api": e.name,
                "op": op,
                "path": path,
                "size_class": size_class(bucket),
                "count": count,
                "bytes": nbytes,
                "errors": errors,
                "mean_latency_us": round(lat_ns / count / 1000, 2) if count else None,
                "route": (_NO_COPY if why is None else _LOST if lost else _ELSEWHERE).route,
            }
            if why is not None:
                row["why"] = why
            if lost:
                row["lost"] = True
            if serial in self.was:
                row["renamed_from"] = self.was[serial]
            out.append(row)
        return out


def _lost(e: Event) -> bool:
    """A counter of I/Os whose records the full ring dropped, in a process that may copy to a GPU."""
    return len(e.args) > 8 and bool(e.args[8])


def merge_summary(summary: dict, rows: list[dict]) -> None:
    """Add the counted I/O to its route in the summary, HOST or UNKNOWN (count, bytes; their
    latencies are means per counter, so they stay out of the percentiles and the histogram); the
    route's lost_in_kernel says how many of its I/Os have no per-I/O detail (records dropped)."""
    for route in (Route.HOST, Route.UNKNOWN):
        mine = [r for r in rows if r["route"] == route]
        if not mine:
            continue
        n = sum(r["count"] for r in mine)
        h = summary.get(route)
        if h is None:
            h = summary[route] = {
                "count": 0,
                "bytes": 0,
                "subtypes": [],
                "p50_us": None,
                "p99_us": None,
                "hist_us": [],
            }
        h["count"] += n
        h["bytes"] += sum(r["bytes"] for r in mine)
        h["counted_in_kernel"] = h.get("counted_in_kernel", 0) + n
        lost = sum(r["count"] for r in mine if r.get("lost"))
        if lost:
            h["lost_in_kernel"] = h.get("lost_in_kernel", 0) + lost


def add_lost(lost_by_process: list[dict], rows: list[dict]) -> list[dict]:
    """The kernel's lost I/O per process (bpf.Probes.lost_by_process: those it could not put under
    a file) with the lost counters' rows added, so each process's row has all its I/Os whose record
    was dropped, and in_files how many of them are counted under their file (host_io_counted)."""
    by = {r["pid"]: dict(r) for r in lost_by_process}
    for r in rows:
        if not r.get("lost"):
            continue
        d = by.setdefault(r["pid"], {"pid": r["pid"], "lost": 0, "ios": 0, "bytes": 0, "reads": 0, "read_bytes": 0})
        d["ios"] = d.get("ios", 0) + r["count"]
        d["bytes"] = d.get("bytes", 0) + r["bytes"]
        d["in_files"] = d.get("in_files", 0) + r["count"]
        if r["op"] == "read":
            d["reads"] = d.get("reads", 0) + r["count"]
            d["read_bytes"] = d.get("read_bytes", 0) + r["bytes"]
    return sorted(by.values(), key=lambda r: (-r["lost"], -r["ios"], r["pid"]))
