"""Exported function names of a shared library, read as ELF data (``platform/elf.py``: bounded,
never loaded): which cuMemcpy* doors a libcuda has."""

from __future__ import annotations

from ...platform.elf import dynamic_functions


def dynamic_symbols(path: str) -> set[str]:
    """Names of defined functions in ``.dynsym``; OSError/ValueError when the file is not such an ELF."""
    return set(dynamic_functions(path))


def dynamic_symbol_addresses(path: str) -> dict[str, int]:
    """Defined functions of ``.dynsym`` and their virtual addresses; OSError/ValueError (ElfError)."""
    return dynamic_functions(path)
