"""Each pod's page-cache hit share: of the bytes its processes' reads of data files returned, the
share the kernel did not have to fetch. The kernel counts, per process, the pages it added to the
page cache inside that process's own reads of data files (tracepoint filemap:mm_filemap_add_to_page_cache
while the read is in flight: probes/cufile_trace.c read_fills) — the read's misses, readahead
included, whatever the file system (a block device, NFS, FUSE). The reads' bytes come from the
verdicts (per-I/O) and the kernel's host-I/O counters (counted.py). So:

    hit share = 1 - filled / read      (at least 0: readahead may fill more than the reads took)

In a scale-out, the first pod to read a weights file fills the cache and the next ones hit it: the
first pod's share is low, the others' high; on a node short of memory the cache is evicted between
pods and every pod's share stays low.

Only what passes through the page cache counts: reads of a file every open of which was O_DIRECT
(the classifier knows each open's flags) are left out, as are cuFile calls and mmap'd loads (the
faults of a mapping are not reads: their share is not measured yet). io_uring reads and readahead
done outside the read (fadvise, a kernel thread) are not seen, so a pod reading that way shows a
share too high; where the kernel's map could not be read the share is unknown (None), never 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .counted import READS

if TYPE_CHECKING:
    from ...schema import trace as schema


class CacheShare:
    """Feed it the verdicts (``add``), the kernel's host-I/O counters (``set_counted``, cumulative)
    and the kernel's fills (``set_fills``, cumulative); ``per_pod`` says each pod's share so far.
    KEEP(path): whether a file's reads count (under the trace's path filter, and not O_DIRECT on
    every open: no page cache); PATH_OF(dev, ino): the data file of a fill's inode (None: not one the
    trace opened as data)."""

    def __init__(self, keep=None, path_of=None) -> None:
        self.keep = keep or (lambda path: True)
        self.path_of = path_of or (lambda dev, ino: None)
        self.read: dict[int, int] = {}  # pid -> bytes its buffered reads returned (verdicts)
        self.counted: dict[tuple, tuple[int, int]] = {}  # kernel counter -> (pid, bytes)
        self.fills: dict[int, int] | None = {}  # pid -> bytes added to the page cache in its reads

    def add(self, v: schema.IoLine) -> None:
        if v["op"] != "read" or v["api"] not in READS or v["size"] <= 0 or not v["path"]:
            return
        if not self.keep(v["path"]):
            return
        self.read[v["pid"]] = self.read.get(v["pid"], 0) + v["size"]

    def add_all(self, vs) -> None:
        for v in vs:
            self.add(v)

    def set_counted(self, rows: list[dict]) -> None:
        """The kernel's host-I/O counters as they stand (counted.CountedIo rows): reads of files."""
        for r in rows:
            if r.get("lost") or r["api"] not in READS or not r.get("path") or not self.keep(r["path"]):
                continue
            self.counted[(r["pid"], r["api"], r["path"], r["size_class"])] = (r["pid"], r["bytes"])

    def set_fills(self, fills: dict[tuple[int, int, int], int] | None) -> None:
        """The kernel's fills as they stand ((pid, dev, ino) -> bytes; None: unreadable)."""
        if fills is None:
            self.fills = None
            return
        got: dict[int, int] = {}
        for (pid, dev, ino), n in fills.items():
            path = self.path_of(dev, ino)
            if path is not None and self.keep(path):
                got[pid] = got.get(pid, 0) + n
        self.fills = got

    def of_pids(self, pids) -> dict | None:
        """{read_bytes, filled_bytes, hit_share} of the processes PIDS together; None where nothing
        they read went through the page cache."""
        pids = set(pids)
        read = sum(n for p, n in self.read.items() if p in pids)
        read += sum(n for p, n in self.counted.values() if p in pids)
        if read <= 0:
            return None
        if self.fills is None:
            return {"read_bytes": read, "filled_bytes": None, "hit_share": None}
        filled = sum(n for p, n in self.fills.items() if p in pids)
        return {"read_bytes": read, "filled_bytes": filled, "hit_share": round(max(0.0, 1 - filled / read), 3)}

    def by_pid(self) -> dict[int, tuple[int, int | None]]:
        """pid -> (bytes its buffered reads returned, bytes added to the page cache in them; None:
        not readable), for the processes that read through the cache (the exporter's counters)."""
        out: dict[int, tuple[int, int | None]] = {}
        read = dict(self.read)
        for p, n in self.counted.values():
            read[p] = read.get(p, 0) + n
        for p, n in read.items():
            if n > 0:
                out[p] = (n, None if self.fills is None else self.fills.get(p, 0))
        return out

    def per_pod(self, pod_of: dict) -> dict[str, dict]:
        """pod uid -> of_pids of its processes (POD_OF: pid -> platform.containers.Identity)."""
        pids: dict[str, list[int]] = {}
        for pid, i in pod_of.items():
            if i is not None and i.pod_uid:
                pids.setdefault(i.pod_uid, []).append(pid)
        out = {}
        for uid, ps in pids.items():
            got = self.of_pids(ps)
            if got is not None:
                out[uid] = got
        return out
