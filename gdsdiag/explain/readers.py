"""Read what a user pastes: a bounded, regular file (or stdin), decoded with replacement, its kind
detected from its content, and its lines split into records (time, pid, level, message)."""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass

from ..errors import GdsdiagError, UsageError
from ..textparse import unbold

MAX_BYTES = 64 << 20  # cufile.log is capped at 32 MB by default; twice that is not a log


@dataclass
class Line:
    file: str
    lineno: int
    kind: str
    text: str  # the message (cufile.log/dmesg: without prefix), stripped
    raw: str
    level: str | None = None  # cufile.log: ERROR WARN NOTICE INFO DEBUG TRACE
    pid: int | None = None
    tid: int | None = None
    time: str | None = None  # as written in the input
    sort_time: tuple | None = None  # comparable form of time
    component: str | None = None  # cufile.log: "cufio-fs" (the line number after ':' dropped)


def read_input(path: str) -> str:
    """The text of ``path`` ('-' = stdin): a regular file of at most MAX_BYTES, never a device,
    FIFO or directory; invalid UTF-8 is replaced, not fatal."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        try:
            st = os.stat(path)
        except FileNotFoundError as e:  # names nothing there: a usage error (exit 4)
            raise UsageError(f"cannot read {path}: {e.strerror}", "check the path") from None
        except OSError as e:
            raise GdsdiagError(f"cannot read {path}: {e.strerror}", "check the path") from None
        if not stat.S_ISREG(st.st_mode):
            raise GdsdiagError(
                f"{path} is not a regular file", "give a saved log or command output (a file, or '-' for stdin)"
            )
        if st.st_size > MAX_BYTES:
            raise GdsdiagError(
                f"{path} is {st.st_size >> 20} MiB, over the {MAX_BYTES >> 20} MiB limit",
                "pass the relevant part (e.g. 'tail -n 100000 FILE > part.log')",
            )
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as e:
            raise GdsdiagError(f"cannot read {path}: {e.strerror}", "check the path and permissions") from None
    if len(data) > MAX_BYTES:
        raise GdsdiagError(f"{path} is over the {MAX_BYTES >> 20} MiB limit", "pass the relevant part")
    return data.decode("utf-8", errors="replace")


# " 16-06-2024 05:40:20:816 [pid=3006 tid=3006] ERROR  cufio-topo-nvfs:78 pci device ..."
# ASCII digits of bounded length (issue 24): int() of a match must never fail ('²' is \d in str
# patterns; 5,000 digits pass \d+ and fail int())
CUFILE_RX = re.compile(
    r"^\s*(?P<time>(?P<d>\d\d)-(?P<mo>\d\d)-(?P<y>\d{4}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d):(?P<ms>\d{1,6}))"
    r"\s+\[pid=(?P<pid>[0-9]{1,10}) tid=(?P<tid>[0-9]{1,10})\]\s+(?P<level>[A-Z]+)\s+(?P<comp>[\w.\-]+):\d+\s?(?P<msg>.*)$",
    re.ASCII,
)
# The same line with its timestamp (and often the [pid tid] part) cut off, as people trim what
# they paste: "[pid=3006 tid=3006] ERROR  cufio-fs:78 ..." or "ERROR  cufio-fs:204 NVMe Driver ...".
# The level word followed by a component:line is cufile.log's own shape, so it is read by content.
CUFILE_TRIM_RX = re.compile(
    r"^\s*(?:\[pid=(?P<pid>\d+) tid=(?P<tid>\d+)\]\s+)?(?P<level>ERROR|WARN|NOTICE|INFO|DEBUG|TRACE)\s+"
    r"(?P<comp>[\w.\-]+):\d+\s?(?P<msg>.*)$"
)
DMESG_RX = re.compile(r"^\s*\[\s*(?P<time>\d+\.\d+)\]\s?(?P<msg>.*)$")
# 'dmesg -T' (--ctime) prints a wall-clock time instead of seconds: "[Sat Sep  9 20:24:26 2023] nvidia-fs:..."
# (gds-nvidia-fs#26); the same kernel line, so the same reader
DMESG_CTIME_RX = re.compile(
    r"^\s*\[(?P<time>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>[A-Z][a-z]{2}) {1,2}(?P<d>\d{1,2}) "
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) (?P<y>\d{4}))\]\s?(?P<msg>.*)$",
    re.ASCII,
)
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
# cufile.log entries glued onto one line (a paste that lost its line breaks, LMCache#795's second
# paste): the next entry starts with its own date and '[pid=': split there, so each is read alone
# ((?<!\s): a run of blanks is tried once from its start, not from each blank: 4.5 s on a line of
# spaces otherwise, tests/test_hostile_regex.py)
CUFILE_GLUED_RX = re.compile(r"(?<!\s)\s+(?=\d\d-\d\d-\d{4} \d\d:\d\d:\d\d:\d{1,6}\s+\[pid=\d+ tid=\d+\]\s)", re.ASCII)
GDSIO_RX = re.compile(
    r"^IoType: \w+ XferType: \w+|(^|[\s/$])gdsio(_verify)?\s+-|file register error:|"
    # gdsio's own failure lines (gds-nvidia-fs#57), pasted without the command line
    r"^(Error: IO failed stopping traffic|failed to submit io of type|(write|read) io failed of type|io failed :ret :)"
)
# kernel lines of nvidia-fs pasted without dmesg's '[ seconds]' prefix (journalctl -o cat, a forum paste)
NVFS_KMSG_RX = re.compile(r"^\s*nvidia[-_]fs:\s*\S")
# kernel lines without the dmesg time stamp, as 'journalctl -k | grep -i iommu' prints them in NVIDIA's GDS
# installation guide ('iommu: Default domain type: Translated', 'pci 0000:XX:YY.Z: Adding to iommu group 0')
IOMMU_KMSG_RX = re.compile(
    r"^\s*(iommu: |AMD-Vi: |DMAR: |pci [0-9A-Za-z]{4}:[0-9A-Za-z]{2}:[0-9A-Za-z]{2}\.[0-9A-Za-z]: (AMD-Vi: |Adding to iommu group ))"
)
GDSCHECK_RX = re.compile(
    r"^\s*(GDS release version|DRIVER CONFIGURATION:|cuFile CONFIGURATION:|CUFILE CONFIGURATION:|"
    # gdscheck -p --object (GDS 1.20): its section titles and version label, as libcufile 1.20.0.107 has them
    r"CUOBJECT CONFIGURATION:|CUOBJECT ENVIRONMENT:|cuObject client release version:|"
    r"Platform verification (succeeded|failed)|--rdma_device_status|"
    # a paste of only the DRIVER CONFIGURATION rows (gds-nvidia-fs#4): the row shape itself
    r"(NVMe|NVMeOF|NVMe P2PDMA|SCSI|ScaleFlux CSD|NVMesh|DDN EXAScaler|IBM Spectrum Scale|NFS|BeeGFS|WekaFS"
    r"|Userspace RDMA)\s*:\s*(Supported|Unsupported)\s*$)"
)
# NVIDIA's gds_stats (cuFile user-space counters of a running process)
GDS_STATS_RX = re.compile(r"^\s*(cuFile STATS VERSION\s*:|GLOBAL STATS:|PER_GPU STATS:|READ-WRITE SIZE HISTOGRAM\s*:)")
NVFS_RX = re.compile(r"^\s*(NVFS statistics\(ver:|NVFS Driver\(version:|Bar1-map\s*:|Mmap\s*:)")


def detect(text: str) -> str | None:
    """The kind of a pasted text, by which known line shape dominates; None when none fits."""
    score = dict.fromkeys(("cufile-log", "gdsio", "gdscheck", "nvfs-stats", "gds-stats", "dmesg"), 0)
    for raw in text.splitlines()[:20000]:
        if CUFILE_RX.match(raw) or CUFILE_TRIM_RX.match(raw):
            score["cufile-log"] += 1
        elif GDSIO_RX.search(raw.strip()):
            score["gdsio"] += 3
        elif GDSCHECK_RX.match(raw):
            score["gdscheck"] += 3
        elif GDS_STATS_RX.match(raw):
            score["gds-stats"] += 3
        elif NVFS_RX.match(raw):
            score["nvfs-stats"] += 3
        elif DMESG_RX.match(raw) or DMESG_CTIME_RX.match(raw) or NVFS_KMSG_RX.match(raw) or IOMMU_KMSG_RX.match(raw):
            score["dmesg"] += 1
    kind, best = max(score.items(), key=lambda kv: kv[1])
    return kind if best else None


def _is_header(lineno: int, raw: str) -> bool:
    # corpus files carry '# source/machine/date' lines on top; a pasted text may too
    return lineno <= 5 and raw.startswith("#")


def _pieces(text: str):
    """(line number, text) of each line; a line that holds several cufile.log entries glued
    together gives one piece per entry, all with that line's number."""
    for n, raw in enumerate(text.splitlines(), 1):
        if CUFILE_RX.match(raw):
            parts = [part for part in CUFILE_GLUED_RX.split(raw) if part.strip()]  # (not the line's own indent)
            if len(parts) > 1:
                for part in parts:
                    yield n, " " + part
                continue
        yield n, raw


def split(path: str, text: str, kind: str) -> tuple[list[Line], int]:
    """Records of the lines that carry something, and the number of blank/structural lines skipped."""
    out: list[Line] = []
    skipped = 0
    for n, raw in _pieces(text):
        s = raw.strip()
        # blank, the capture's '#' lines, separators, and the '. . .' elisions of NVIDIA's own examples
        if not s or _is_header(n, raw) or not s.strip("=-") or not s.strip(". "):
            skipped += 1
            continue
        m = CUFILE_RX.match(raw)
        if m:
            t = (int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), int(m["ms"]))
            out.append(
                Line(
                    path,
                    n,
                    "cufile-log",
                    m["msg"].strip(),
                    raw,
                    m["level"],
                    int(m["pid"]),
                    int(m["tid"]),
                    m["time"],
                    t,
                    m["comp"],
                )
            )
            continue
        trim = CUFILE_TRIM_RX.match(raw) if kind == "cufile-log" else None
        if trim:
            pid, tid = (int(trim["pid"]), int(trim["tid"])) if trim["pid"] else (None, None)
            out.append(
                Line(path, n, "cufile-log", trim["msg"].strip(), raw, trim["level"], pid, tid, None, None, trim["comp"])
            )
            continue
        if kind == "dmesg":
            d = DMESG_RX.match(raw)
            if d:
                out.append(Line(path, n, "dmesg", d["msg"].strip(), raw, time=d["time"], sort_time=(float(d["time"]),)))
                continue
            c = DMESG_CTIME_RX.match(raw)
            if c and c["mon"] in _MONTHS:
                ct = (int(c["y"]), _MONTHS[c["mon"]], int(c["d"]), int(c["h"]), int(c["mi"]), int(c["s"]))
                out.append(Line(path, n, "dmesg", c["msg"].strip(), raw, time=c["time"], sort_time=ct))
                continue
        if kind == "gdscheck":
            s = unbold(s)  # (as the gdscheck importer reads it)
        if kind == "gdscheck" and (re.fullmatch(r"[A-Z ]+:", s) or s.endswith("CONFIGURATION:")):
            skipped += 1  # section titles: ENVIRONMENT:, GPU INFO:, ...
            continue
        if kind == "gdsio":
            s = re.sub(r"^\$\s+", "", s)  # pasted shell prompts
        if kind in ("gds-stats", "nvfs-stats"):
            s = re.sub(r"^\S+> (?=(gds_stats|cat)\b)", "", s)  # a pasted prompt ('dgx2> gds_stats -p ...')
        out.append(Line(path, n, kind, s, raw))
    return out, skipped
