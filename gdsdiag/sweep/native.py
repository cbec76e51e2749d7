"""The compiled I/O loop (csrc/ioloop.c): built at first use, loaded with cffi, or a stated fallback.

How it is built, and why this way: the loop is plain C that needs only libc (cuFile and CUDA are
reached through function pointers from the libraries gdsdiag already loaded), so it is compiled
with the system C compiler (``cc``, or ``$CC``) into a shared library and loaded with cffi in ABI
mode. No Python headers (python3-dev) are needed, and ``pip install`` stays compiler-free: the
library is built on the first sweep into ``$XDG_CACHE_HOME/gdsdiag`` (``~/.cache/gdsdiag``), named
by a hash of the source and the compiler, so an upgrade rebuilds it. Where there is no compiler
the sweep runs its Python loop and every result says so (``loop`` in the JSON, a line under the
table) — Python's per-I/O cost is then part of the numbers.

The declarations (csrc/ioloop.h) are parsed by cffi even when the library cannot be built: the
Python loop keeps its state in the same ``struct gd_job``, so both loops report the same fields.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

_lock = threading.Lock()
_state: dict = {}


def _csrc_file(name: str) -> str:
    try:
        from importlib.resources import files

        p = files("gdsdiag._csrc").joinpath(name)
        if p.is_file():
            return str(p)
    except (ModuleNotFoundError, FileNotFoundError, OSError, TypeError):
        pass
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(here, "csrc", name)


def ffi():
    """The cffi FFI with csrc/ioloop.h declared (no compiler needed for this)."""
    with _lock:
        if "ffi" not in _state:
            import cffi

            f = cffi.FFI()
            with open(_csrc_file("ioloop.h")) as fh:
                f.cdef(fh.read())
            _state["ffi"] = f
        return _state["ffi"]


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gdsdiag")


def _compiler() -> str | None:
    cc = os.environ.get("CC") or "cc"
    return shutil.which(cc) or shutil.which("gcc") or shutil.which("clang")


def _build(cc: str, src: str, hdr_dir: str, out: str) -> str | None:
    """Compile to a temporary name in the cache and rename into place; None or the error text."""
    d = os.path.dirname(out)
    os.makedirs(d, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ioloop-", suffix=".so", dir=d)
    os.close(fd)
    try:
        r = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-I", hdr_dir, "-o", tmp, src], capture_output=True, text=True, timeout=120
        )
        if r.returncode != 0:
            err = (r.stderr or r.stdout).strip().splitlines()
            return f"{os.path.basename(cc)} failed: {err[0] if err else 'exit ' + str(r.returncode)}"
        os.chmod(tmp, 0o700)
        os.replace(tmp, out)
        return None
    except (OSError, subprocess.SubprocessError) as e:
        return f"{os.path.basename(cc)} could not run: {e}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load():
    """(lib, None) with the compiled loop, or (None, why) — the why goes into every result."""
    with _lock:
        if "lib" in _state:
            return _state["lib"], _state["why"]
    lib, why = None, None
    if os.environ.get("GDSDIAG_PYTHON_LOOP"):
        why = "GDSDIAG_PYTHON_LOOP is set"
    else:
        src, hdr = _csrc_file("ioloop.c"), _csrc_file("ioloop.h")
        cc = _compiler()
        if not os.path.exists(src):
            why = f"{src} is not installed"
        elif cc is None:
            why = "no C compiler (install gcc: apt-get install gcc) to build the I/O loop"
        else:
            h = hashlib.sha256()
            for p in (src, hdr):
                with open(p, "rb") as f:
                    h.update(f.read())
            h.update(os.path.realpath(cc).encode())
            out = os.path.join(cache_dir(), f"ioloop-{h.hexdigest()[:16]}.so")
            if not os.path.exists(out):
                why = _build(cc, src, os.path.dirname(hdr), out)
            if why is None:
                try:
                    lib = ffi().dlopen(out)
                    if lib.gd_abi_version() != 4:
                        lib, why = None, f"{out} is from another gdsdiag version"
                except OSError as e:
                    lib, why = None, f"cannot load {out}: {e}"
    with _lock:
        _state["lib"], _state["why"] = lib, why
    return lib, why


def have_uring() -> bool:
    lib, _ = load()
    return bool(lib is not None and lib.gd_have_uring())
