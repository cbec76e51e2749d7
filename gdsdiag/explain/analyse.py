"""Explain every line of the inputs and fold repeats: one group per (what it is, message), with
count, pids and first/last time, so a 1000-line cufile.log of twenty runs reads as ten findings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_WARN
from ..verdicts import Severity, worst
from . import catalog
from .readers import Line, detect, read_input, split

if TYPE_CHECKING:
    from ..schema import explain as schema

_MATTERS_RX = re.compile(r"error|fail|not supported|unsupported|does not have|not registered|not loaded", re.I)
_NVFS_ERR_RX = re.compile(r"\b(err|io_state_err|pg-cache-fail|pg-cache-eio|cpu-gpu-pages|sg-ext|dma-map|dma-ref)=[1-9]")
_DMESG_OURS_RX = re.compile(r"nvidia|nvfs|nvme|p2p", re.I)
_DMESG_OOPS_RX = re.compile(r"kernel BUG at|BUG: unable to handle|general protection fault|Kernel panic|Oops: ")


def matters(line: Line) -> bool:
    """A line a support engineer must not leave unexplained: a cufile.log ERROR/WARN, a tool's error
    line, a non-zero nvidia-fs error counter, an nvidia/nvme error in dmesg."""
    if line.kind == "cufile-log":
        return (line.level or "") in ("ERROR", "WARN", "WARNING")
    if line.kind == "nvfs-stats":
        return bool(_NVFS_ERR_RX.search(line.text))
    if line.kind == "gds-stats":
        return bool(re.search(r"\b(err|posix)=[1-9]|Errors\s*:\s*[1-9]", line.text))
    if line.kind == "dmesg":
        # a kernel BUG/oops matters whichever module it names (gds-nvidia-fs#66: exit 0 on an oops in nvidia-fs)
        if _DMESG_OOPS_RX.search(line.text):
            return True
        return bool(
            _DMESG_OURS_RX.search(line.text) and (_MATTERS_RX.search(line.text) or "incompatible" in line.text.lower())
        )
    if line.kind == "gdscheck" and re.match(r"^[\w \t]+:[ \t]*Unsupported\s*$", line.text):
        return line.text.split(":")[0].strip().upper() in ("NVME", "NVME P2PDMA")
    return bool(_MATTERS_RX.search(line.text))


@dataclass
class Group:
    explanation: catalog.Explanation
    kind: str
    message: str
    level: str | None
    component: str | None
    count: int = 0
    pids: set = field(default_factory=set)
    first: Line | None = None
    last: Line | None = None
    files: list = field(default_factory=list)
    lines: list = field(default_factory=list)  # (file, lineno), the first few

    def add(self, ln: Line) -> None:
        self.count += 1
        if ln.pid is not None:
            self.pids.add(ln.pid)
        if self.first is None or (ln.sort_time and self.first.sort_time and ln.sort_time < self.first.sort_time):
            self.first = ln
        if (
            self.last is None
            or (ln.sort_time and self.last.sort_time and ln.sort_time >= self.last.sort_time)
            or not ln.sort_time
        ):
            self.last = ln
        if ln.file not in self.files:
            self.files.append(ln.file)
        if len(self.lines) < 5:
            self.lines.append((ln.file, ln.lineno))


@dataclass
class FileSummary:
    path: str
    kind: str | None
    lines: int
    explained: int = 0
    unknown: int = 0
    skipped: int = 0


@dataclass
class Report:
    files: list[FileSummary]
    groups: list[Group]
    unknown: list[Line]
    unknown_that_matter: list[Line]
    gdsio_runs: list[schema.GdsioRun] = field(default_factory=list)  # every gdsio result line, parsed

    def worst(self) -> Severity | None:
        return worst(g.explanation.severity for g in self.groups)

    @property
    def exit_code(self) -> int:
        gravest = self.worst()
        if gravest == Severity.FAIL:
            return EXIT_FAIL
        if gravest == Severity.WARN or self.unknown_that_matter:
            return EXIT_WARN
        return EXIT_OK


P2PDMA_SUPPORTED = re.compile(r"^NVMe P2PDMA\s*:\s*Supported\s*$")


def _key(ln: Line, ex: catalog.Explanation) -> tuple:
    # the same message from another pid/time is the same finding; numbers that identify the
    # process (fd, pointer, tid) are part of the text and would split groups, so mask them
    if ex.severity == Severity.INFO:
        return ex.id, ln.kind, None, None, None  # informational lines fold into one entry each
    return ex.id, ln.kind, ln.level, ln.component, _mask(ln.text)


_MASK_RX = re.compile(r"\b(fd:? ?|ptr |tid=)-?(0x)?[0-9a-fA-F]+")


@lru_cache(maxsize=1 << 16)
def _mask(text: str) -> str:
    return _MASK_RX.sub(r"\1#", text)


def _run(ln: Line, f: dict) -> schema.GdsioRun:
    done, size = int(f["done"]), int(f["size"])
    return {
        "file": ln.file,
        "line": ln.lineno,
        "io": f["io"],
        "xfer": f["xfer"],
        "threads": int(f["threads"]),
        "io_size_kib": int(f["iosize"]),
        "dataset_kib": done,
        "file_kib": size,
        "gib_per_s": float(f["gibs"]),
        "avg_latency_us": float(f["lat"]),
        "ops": int(f["ops"]),
        "seconds": float(f["secs"]),
        "wrapped": done > size,
    }  # timed (-T) runs go over the file size


def explain_texts(inputs: list[tuple[str, str]], kind: str | None = None) -> Report:
    """``inputs`` is [(name, text)]; ``kind`` forces the input kind instead of detecting it."""
    files: list[FileSummary] = []
    groups: dict[tuple, Group] = {}
    unknown: list[Line] = []
    unknown_matter: list[Line] = []
    runs: list[schema.GdsioRun] = []
    for name, text in inputs:
        k = kind or detect(text)
        lines, skipped = split(name, text, k or "unknown")
        fs = FileSummary(name, k, len(text.splitlines()), skipped=skipped)
        # gdscheck's 'NVMe' row is the nvidia-fs route: with 'NVMe P2PDMA : Supported' in the same
        # output, NVMe has a GDS route all the same (NVIDIA's P2PDMA guide shows both rows so)
        p2pdma = k == "gdscheck" and any(P2PDMA_SUPPORTED.match(ln.text) for ln in lines)
        for ln in lines:
            ex = catalog.explain(ln.kind, ln.text)
            if p2pdma and ex is not None and ex.id == "gdscheck-nvme-unsupported":
                ex = catalog.by_id("gdscheck-nvme-via-p2pdma")
            if ex is None:
                fs.unknown += 1
                unknown.append(ln)
                if matters(ln):
                    unknown_matter.append(ln)
                continue
            fs.explained += 1
            if ex.id == "gdsio-result":
                runs.append(_run(ln, ex.fields))
            key = _key(ln, ex)
            g = groups.get(key)
            if g is None:
                g = groups[key] = Group(ex, ln.kind, ln.text, ln.level, ln.component)
            g.add(ln)
        files.append(fs)
    ordered = sorted(
        groups.values(),
        key=lambda g: (
            -g.explanation.severity.rank,
            g.files and files.index(next(f for f in files if f.path == g.files[0])),
            (g.first.sort_time if g.first else None) or (),  # (every group has its first line)
            g.first.lineno if g.first else 0,
        ),
    )
    return Report(files, ordered, unknown, unknown_matter, runs)


def explain_paths(paths: list[str], kind: str | None = None) -> Report:
    return explain_texts([(p, read_input(p)) for p in paths], kind)
