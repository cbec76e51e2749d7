"""A shared library read as ELF data, never loaded: its exported functions (``.dynsym``) and its
SystemTap SDT notes (``.note.stapsdt``).

The files come from strangers: ``gdsdiag trace`` (often root) reads every libcufile and libcuda a
traced process maps or opens, and any user can make a process open a file of that name. So every
read is bounded and positioned (``pread`` of the parts needed, never the whole file: an 8 GB sparse
``libcufile.so.1`` costs a few KiB), the file is opened without blocking on a FIFO or a device, and
every malformed layout is one ``ElfError`` (a ValueError) naming what is wrong, never a
``struct.error`` or ``IndexError`` out of the middle of a parse.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass

# Bounds well above any real library: libcuda 580's .dynsym is ~20 KiB, its .dynstr ~30 KiB, and
# libcufile 1.15's .note.stapsdt ~7 KiB; a section past these is refused, not read.
MAX_SECTIONS = 4096
MAX_SYMTAB_BYTES = 16 << 20
MAX_STRTAB_BYTES = 16 << 20
MAX_NOTES_BYTES = 4 << 20
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym
SHT_NOTE, SHT_DYNSYM = 7, 11
STT_FUNC = 2


class ElfError(ValueError):
    """The file is not an ELF64 little-endian file we can read, or its layout is malformed."""


@dataclass(frozen=True)
class Section:
    name: int  # offset into the section-name string table
    type: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class SdtNote:
    provider: str
    name: str
    pc: int
    semaphore: int
    args: str


class ElfFile:
    """One open ELF file: positioned, bounded reads of its header, section table and sections."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path
        self.size = os.fstat(fd).st_size
        head = self._read(0, 64)
        if len(head) < 64 or head[:4] != b"\x7fELF":
            raise ElfError(f"{path}: not an ELF file")
        if head[4] != 2 or head[5] != 1:
            raise ElfError(f"{path}: only 64-bit little-endian ELF is supported")
        (shoff,) = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
        if shoff == 0 or shnum == 0:
            raise ElfError(f"{path}: no section headers")
        if shentsize != _SHDR.size or shnum > MAX_SECTIONS:
            raise ElfError(f"{path}: section table of {shnum} entries of {shentsize} bytes is not a real library's")
        table = self._read(shoff, shnum * shentsize)
        if len(table) != shnum * shentsize:
            raise ElfError(f"{path}: section table runs past the end of the file")
        self.sections = [
            Section(n, t, off, size, link, ent)
            for n, t, _fl, _addr, off, size, link, _info, _al, ent in _SHDR.iter_unpack(table)
        ]
        self.shstrndx = shstrndx

    def _read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset > self.size:
            raise ElfError(f"{self.path}: an offset ({offset:#x}) past the end of the file")
        return os.pread(self.fd, n, offset)

    def section_data(self, sec: Section, limit: int) -> bytes:
        if sec.size > limit:
            raise ElfError(f"{self.path}: a section of {sec.size} bytes (more than {limit} is not read)")
        data = self._read(sec.offset, sec.size)
        if len(data) != sec.size:
            raise ElfError(f"{self.path}: a section runs past the end of the file")
        return data

    def section_named(self, wanted: bytes) -> list[Section]:
        if not 0 <= self.shstrndx < len(self.sections):
            raise ElfError(f"{self.path}: no section-name table")
        names = self.section_data(self.sections[self.shstrndx], MAX_STRTAB_BYTES)
        return [s for s in self.sections if _cstr(names, s.name) == wanted]


def _cstr(table: bytes, off: int) -> bytes:
    if not 0 <= off < len(table):
        return b""
    end = table.find(b"\0", off)
    return table[off : end if end >= 0 else len(table)]


def open_elf(path: str) -> ElfFile:
    """Open PATH read-only without blocking (a FIFO or device named like a library is refused, not
    waited on) and check it is a regular file; OSError or ElfError."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ElfError(f"{path}: not a regular file")
        return ElfFile(fd, path)
    except BaseException:
        os.close(fd)
        raise


def _with_elf(path: str, fn):
    elf = open_elf(path)
    try:
        return fn(elf)
    except (struct.error, IndexError, UnicodeError) as e:  # (any malformed layout is one ElfError)
        raise ElfError(f"{path}: malformed ELF ({type(e).__name__}: {e})") from None
    finally:
        os.close(elf.fd)


def dynamic_functions(path: str) -> dict[str, int]:
    """Defined functions of ``.dynsym`` and their virtual addresses; OSError or ElfError."""

    def read(elf: ElfFile) -> dict[str, int]:
        out: dict[str, int] = {}
        for sec in elf.sections:
            if sec.type != SHT_DYNSYM:
                continue
            if not 0 <= sec.link < len(elf.sections):
                raise ElfError(f"{path}: .dynsym names no string table")
            syms = elf.section_data(sec, MAX_SYMTAB_BYTES)
            strs = elf.section_data(elf.sections[sec.link], MAX_STRTAB_BYTES)
            usable = len(syms) - len(syms) % _SYM.size
            for st_name, st_info, _other, st_shndx, st_value, _size in _SYM.iter_unpack(syms[:usable]):
                if st_shndx == 0 or (st_info & 0xF) != STT_FUNC:  # undefined, or not a function
                    continue
                out.setdefault(_cstr(strs, st_name).decode(errors="replace"), st_value)
        return out

    return _with_elf(path, read)


def sdt_notes(path: str) -> list[SdtNote]:
    """The SystemTap SDT probes of ``.note.stapsdt`` (NT_STAPSDT = 3, owner ``stapsdt``, descriptor
    = pc, base, semaphore addresses then ``provider\\0name\\0args\\0``); [] when none; OSError or
    ElfError."""

    def read(elf: ElfFile) -> list[SdtNote]:
        out: list[SdtNote] = []
        for sec in elf.section_named(b".note.stapsdt"):
            if sec.type != SHT_NOTE:
                continue
            data = elf.section_data(sec, MAX_NOTES_BYTES)
            pos = 0
            while pos + 12 <= len(data):
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
                    prov, name, args = (p.decode(errors="replace") for p in parts[:3])
                    out.append(SdtNote(prov, name, pc, sem, args))
        return out

    return _with_elf(path, read)
