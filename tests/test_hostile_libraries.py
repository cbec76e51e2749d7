"""Libraries a traced program opens are a stranger's files (issue 42, items 1 and 3): the root
tracer reads them as ELF data only, bounded, and never loads one a user could have written; the
driver is asked for its cuGetProcAddress doors by a child running as the library's owner.

The planted libraries here are real shared objects built with gcc whose constructor records the
uid it ran as: what an attacker's ``libcuda.so.1`` would do."""

import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import time

import pytest
from conftest import GDSDIAG, LIVE_MARKS

from gdsdiag.platform.elf import ElfError, dynamic_functions, sdt_notes
from gdsdiag.trace.probes.cudadoors import proc_address_sites

NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: files owned by another user, a setuid child")
NO_GCC = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the planted library")

PLANTED_C = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "a");
    if (f) { fprintf(f, "%%d\n", (int)getuid()); fclose(f); }
}
int cuInit(unsigned flags) { return 100; }  /* CUDA_ERROR_NO_DEVICE */
int cuMemcpyHtoD_v2(void) { return 0; }
"""


def _planted(tmp_path, owner: int, mode: int):
    """A libcuda.so.1 whose constructor appends its uid to a world-writable marker file."""
    box = tmp_path / "box"
    box.mkdir()
    os.chmod(box, 0o1777)  # (sticky, world-writable: the child of any uid can write its mark)
    mark = box / "ran-as"
    src = tmp_path / "planted.c"
    src.write_text(PLANTED_C % mark)
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    lib = lib_dir / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    os.chown(lib, owner, owner)
    os.chmod(lib, mode)
    os.chmod(lib_dir, 0o755)
    # (the child reaches the lib by fd: every directory up to pytest's own base, however deep: under
    # pytest-xdist a worker's folder is one level more, and pytest-of-root stayed 0700)
    for d in (tmp_path, *tmp_path.parents):
        os.chmod(d, os.stat(d).st_mode | 0o011)
        if d.name.startswith("pytest-of-"):
            break
    return lib, mark


def _uids(mark) -> list[int]:
    return [int(x) for x in mark.read_text().split()] if mark.exists() else []


@ROOT_ONLY
@NO_GCC
def test_a_users_libcuda_is_asked_as_that_user_never_as_root(tmp_path):
    lib, mark = _planted(tmp_path, NOBODY, 0o755)
    sites, why = proc_address_sites(str(lib))
    assert sites == {} and why == "cuInit failed (no usable GPU here)"
    assert _uids(mark) == [NOBODY]  # its constructor ran, as its owner: no right it did not have


@ROOT_ONLY
@NO_GCC
def test_a_library_others_can_write_is_never_loaded(tmp_path):
    lib, mark = _planted(tmp_path, 0, 0o666)
    sites, why = proc_address_sites(str(lib))
    assert sites == {} and "writable by users other than its owner" in why and "not loaded" in why
    assert _uids(mark) == []


@ROOT_ONLY
@NO_GCC
def test_roots_library_in_a_directory_a_user_can_change_is_never_loaded(tmp_path):
    lib, mark = _planted(tmp_path, 0, 0o755)
    os.chown(lib.parent, NOBODY, NOBODY)  # (a user could swap the file, or put one beside it)
    sites, why = proc_address_sites(str(lib))
    assert sites == {} and "directory a user other than root can change" in why
    assert _uids(mark) == []


@NO_GCC
def test_the_child_answer_is_checked_as_data():
    from gdsdiag.trace.probes.cudadoors import _parse

    assert _parse(b'{"sites": [[4096, 0], [8192, 11]]}') == ({4096: "memcpy_htod", 8192: "memcpy_batch"}, None)
    for bad in (b"", b"[]", b'{"sites": [[1, 99]]}', b'{"sites": [[-5, 0]]}', b'{"sites": [["a", 0]]}'):
        got, why = _parse(bad)
        assert got == {} and why.startswith("the child that asked it gave")
    assert _parse(b'{"why": "' + b"x" * 5000 + b'"}')[1] == "x" * 200


def _elf_header(shoff: int, shnum: int = 1, shstrndx: int = 0) -> bytes:
    h = bytearray(64)
    h[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", h, 0x28, shoff)
    struct.pack_into("<HHHH", h, 0x3A - 2, 0, 64, shnum, shstrndx)
    return bytes(h)


def test_a_sparse_8_gib_library_is_read_in_a_few_kib(tmp_path):
    """Issue 42 item 3: an 8 GB sparse libcufile.so.1 was read whole (MemoryError, the trace ended)."""
    lib = tmp_path / "libcufile.so.1"
    size = 8 << 30
    with open(lib, "wb") as f:
        f.write(_elf_header(size - 4096))
        f.truncate(size)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.monotonic()
    assert sdt_notes(str(lib)) == [] and dynamic_functions(str(lib)) == {}
    assert time.monotonic() - t < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 32 << 10  # KiB


def test_a_section_claiming_gigabytes_is_refused_not_read(tmp_path):
    lib = tmp_path / "libcuda.so.1"
    shdr = struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, 64 + 128, 1 << 33, 1, 0, 8, 24)  # .dynsym of 8 GiB
    strtab = struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, 0, 0, 0, 0, 1, 0)
    lib.write_bytes(_elf_header(64, shnum=2) + shdr + strtab)
    with pytest.raises(ElfError, match="more than"):
        dynamic_functions(str(lib))


def test_a_fifo_named_like_a_library_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "libcuda.so.1"
    os.mkfifo(fifo)
    t = time.monotonic()
    with pytest.raises(ElfError, match="not a regular file"):
        dynamic_functions(str(fifo))
    assert time.monotonic() - t < 1.0


def test_mutated_real_libraries_raise_only_elf_or_os_errors(tmp_path):
    """Item 3's 4 KB malformed libcuda.so.1 raised struct.error out of the trace. Mutations of a
    real library (truncations, bytes flipped in the header and section table) give an answer or
    one ElfError, never another exception."""
    real = next(
        p
        for p in ("/lib/x86_64-linux-gnu/libdl.so.2", "/usr/lib/x86_64-linux-gnu/libdl.so.2", "/lib64/libdl.so.2")
        if os.path.exists(p)
    )
    data = open(real, "rb").read()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    rng = random.Random(42)
    lib = tmp_path / "libcuda.so.1"
    for i in range(400):
        b = bytearray(data)
        if i % 4 == 0:
            b = b[: rng.randrange(len(b))]
        else:
            for _ in range(rng.randrange(1, 8)):
                at = rng.choice(
                    (rng.randrange(64), shoff + rng.randrange(max(len(b) - shoff, 1)), rng.randrange(len(b)))
                )
                if at < len(b):
                    b[at] = rng.randrange(256)
        lib.write_bytes(bytes(b))
        for fn in (dynamic_functions, sdt_notes):
            try:
                fn(str(lib))
            except ElfError:
                pass


@pytest.mark.slow
@ROOT_ONLY
@NO_GCC
@LIVE_MARKS[0]
@LIVE_MARKS[1]
def test_trace_never_runs_a_library_a_traced_program_opens_as_root(tmp_path):
    """The reproducer of item 1: a traced process opens a user's libcuda.so.1; the root trace
    used to ctypes.CDLL it and so ran its constructor as uid 0."""
    lib, mark = _planted(tmp_path, NOBODY, 0o755)
    prog = f"import time; open({str(lib)!r}, 'rb').close(); time.sleep(1.5)"
    r = subprocess.run(
        [*GDSDIAG, "trace", "--json", "--", sys.executable, "-c", prog],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    assert 0 not in _uids(mark)
    assert f"libcuda {lib}: cuGetProcAddress entry points not probed: cuInit failed" in r.stdout
