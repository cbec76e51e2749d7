"""What the block device under the sweep file saw during a point (or a fio run): its own counters
from /sys/dev/block/MAJ:MIN/stat (Documentation/admin-guide/iostats.rst), before and after.

Why: two loops that issue the same I/Os can hand the device different requests. A 1 MiB O_DIRECT
read into 4 KiB pages is 256 segments, which a virtio disk with max_segments 254 splits in two;
into a huge page it is one request. Requests per I/O, their mean size and the device's mean queue
depth (time_in_queue over the wall time) tell that apart from a slower loop, for the sweep and for
fio alike. A file on a filesystem without a block device (tmpfs, major 0) has no counters: None.
"""

from __future__ import annotations

import os

# field order of the stat file: reads, reads merged, sectors read, ms reading, writes, writes
# merged, sectors written, ms writing, in flight, io_ticks ms, time_in_queue ms, (discard, flush…)
_FIELDS = ("reads", "read_merges", "read_sectors", "read_ms", "writes", "write_merges", "write_sectors", "write_ms")


def stat_path(fd: int) -> str | None:
    st = os.fstat(fd)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    if major == 0:
        return None
    path = f"/sys/dev/block/{major}:{minor}/stat"
    return path if os.path.exists(path) else None


def read(path: str | None) -> tuple[int, ...] | None:
    if path is None:
        return None
    try:
        with open(path) as f:
            vals = f.read().split()
        return tuple(int(v) for v in vals[:11])
    except (OSError, ValueError):
        return None


def delta(
    before: tuple[int, ...] | None, after: tuple[int, ...] | None, ios: int, seconds: float, is_read: bool
) -> dict | None:
    """The device's view of ``ios`` I/Os over ``seconds``: requests (and merges) it completed, per
    I/O, their mean size, and its mean queue depth. Other I/O on the same device is in these too
    (the numbers are the device's), so they are context, not the point's own figures."""
    if before is None or after is None or len(before) < 11 or len(after) < 11 or seconds <= 0:
        return None
    d = dict(zip(_FIELDS, (a - b for a, b in zip(after, before))))
    reqs = d["reads"] if is_read else d["writes"]
    sectors = d["read_sectors"] if is_read else d["write_sectors"]
    queue_ms = after[10] - before[10]
    req_ms = d["read_ms"] if is_read else d["write_ms"]
    busy_ms = after[9] - before[9]
    return {
        "requests": reqs,
        "merges": d["read_merges"] if is_read else d["write_merges"],
        "requests_per_io": round(reqs / ios, 3) if ios else None,
        "request_kib": round(sectors * 512 / reqs / 1024, 1) if reqs else None,
        "queue_depth": round(queue_ms / 1000.0 / seconds, 2),
        "busy_percent": round(100.0 * busy_ms / 1000.0 / seconds, 1),
        # the device's own time per request (queued and served, below every loop above it)
        "request_ms": round(req_ms / reqs, 3) if reqs else None,
    }
