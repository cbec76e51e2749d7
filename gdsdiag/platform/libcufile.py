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
import struct
from dataclasses import dataclass, field

from ..cufile._lib import candidates

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
    """USDT probes of an ELF64 little-endian file; [] when there are none; OSError/ValueError when
    the file is not such an ELF."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("only 64-bit little-endian ELF is supported")
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if e_shoff == 0 or e_shnum == 0 or e_shoff + e_shnum * e_shentsize > len(data):
        raise ValueError("no section headers")

    def section(i):
        off = e_shoff + i * e_shentsize
        name, stype, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, off)
        return name, stype, offset, size

    _, _, str_off, str_size = section(e_shstrndx)
    probes: list[UsdtProbe] = []
    for i in range(e_shnum):
        name_off, stype, offset, size = section(i)
        end = data.find(b"\0", str_off + name_off)
        if data[str_off + name_off : end] != b".note.stapsdt" or stype != 7:  # SHT_NOTE
            continue
        pos, stop = offset, min(offset + size, len(data))
        while pos + 12 <= stop:
            namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
            pos += 12
            owner = data[pos : pos + namesz].rstrip(b"\0")
            pos += (namesz + 3) & ~3
            desc = data[pos : pos + descsz]
            pos += (descsz + 3) & ~3
            if ntype != 3 or owner != b"stapsdt" or len(desc) < 24:
                continue
            pc, _base, sem = struct.unpack_from("<QQQ", desc, 0)
            parts = desc[24:].split(b"\0")
            if len(parts) >= 3:
                probes.append(
                    UsdtProbe(
                        parts[0].decode(errors="replace"),
                        parts[1].decode(errors="replace"),
                        pc,
                        sem,
                        parts[2].decode(errors="replace"),
                    )
                )
    return probes


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
    except (OSError, ValueError, struct.error) as e:
        info.probe_error = f"{path}: {e}"
    return info
