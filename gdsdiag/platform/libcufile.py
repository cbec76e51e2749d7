"""Find libcufile the way the bindings will load it (``cufile/_lib.candidates``, their own search
order), tell its version, and list its USDT probes.

Nothing here loads the library: the ELF file is read as bytes (``.note.stapsdt`` notes, the
SystemTap SDT format: ``NT_STAPSDT`` = 3, owner ``stapsdt``, descriptor = pc, base, semaphore
addresses then ``provider\\0name\\0args\\0``), so the check runs on any machine.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

from ..cufile._lib import candidates
from .elf import sdt_notes

# The probes gdsdiag trace keys its verdicts on (NVIDIA GDS troubleshooting guide, "GDS Library
# Tracing"; seen in the x86-64 1.15.1 build on the GPU machine, tests/fixtures/gpu-machine/).
TRACE_PROBES = (
    "cufio_core:cufio_gds_read",
    "cufio_core:cufio_gds_write",
    "cufio_core:cufio_px_read",
    "cufio_core:cufio_px_write",
    "0:cufio-internal-read-bb",
    "0:cufio-internal-write-bb",
)


@dataclass
class UsdtProbe:
    provider: str
    name: str
    pc: int
    semaphore: int
    args: str

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.name}"


def read_usdt_notes(path: str) -> list[UsdtProbe]:
    """USDT probes of an ELF64 little-endian file (read bounded, never loaded: platform/elf.py);
    [] when there are none; OSError/ValueError (ElfError) when the file is not such an ELF."""
    return [UsdtProbe(n.provider, n.name, n.pc, n.semaphore, n.args) for n in sdt_notes(path)]


@dataclass
class LibcufileInfo:
    path: str | None
    found_via: str | None
    version: str | None = None
    candidates: list[tuple[str, str]] = field(default_factory=list)  # (how, path) tried and present
    probes: list[str] = field(default_factory=list)
    trace_probes_present: list[str] = field(default_factory=list)
    probe_error: str | None = None

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "found_via": self.found_via,
            "version": self.version,
            "candidates": [{"via": h, "path": p} for h, p in self.candidates],
            "usdt_probe_count": len(self.probes),
            "trace_probes_present": self.trace_probes_present,
            "probe_error": self.probe_error,
        }


def version_of(path: str) -> str | None:
    """From the resolved file name (libcufile.so.1.15.1) or the wheel's dist-info next to it."""
    m = re.search(r"libcufile\.so\.(\d+\.\d+(?:\.\d+)*)$", os.path.realpath(path))
    if m:
        return m.group(1)
    site = path
    for _ in range(4):
        site = os.path.dirname(site)
    for info in glob.glob(os.path.join(site, "nvidia_cufile*.dist-info")):
        m = re.search(r"nvidia_cufile(?:_cu\d+)?-(\d+(?:\.\d+)+)\.dist-info$", info)
        if m:
            return m.group(1)
    return None


def locate(explicit: str | None = None) -> LibcufileInfo:
    cands = candidates(explicit)
    if not cands:
        return LibcufileInfo(path=None, found_via=None, candidates=[])
    how, path = cands[0]
    info = LibcufileInfo(path=path, found_via=how, version=version_of(path), candidates=cands)
    try:
        probes = read_usdt_notes(path)
        info.probes = sorted({p.key for p in probes})
        info.trace_probes_present = [k for k in TRACE_PROBES if k in info.probes]
    except (OSError, ValueError) as e:
        info.probe_error = f"{path}: {e}"
    return info
