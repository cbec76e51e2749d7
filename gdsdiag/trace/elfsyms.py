"""Exported function names of a shared library (ELF64 little-endian ``.dynsym``), read as bytes:
which cuMemcpy* doors a libcuda has, without loading it."""

from __future__ import annotations

import mmap
import struct


def dynamic_symbols(path: str) -> set[str]:
    """Names of defined functions in ``.dynsym``; OSError/ValueError when the file is not such an ELF."""
    return set(dynamic_symbol_addresses(path))


def dynamic_symbol_addresses(path: str) -> dict[str, int]:
    """Defined functions of ``.dynsym`` and their virtual addresses."""
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
        e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
        secs = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
        out: dict[str, int] = {}
        for _name, stype, _fl, _addr, off, size, link, _info, _al, entsize in secs:
            if stype != 11:  # SHT_DYNSYM
                continue
            str_off = secs[link][4]
            for p in range(off, off + size, entsize or 24):
                st_name, st_info, _other, st_shndx, st_value = struct.unpack_from("<IBBHQ", data, p)
                if st_shndx == 0 or (st_info & 0xF) != 2:  # undefined, or not STT_FUNC
                    continue
                end = data.find(b"\0", str_off + st_name)
                out.setdefault(data[str_off + st_name : end].decode(errors="replace"), st_value)
        return out
    finally:
        data.close()
