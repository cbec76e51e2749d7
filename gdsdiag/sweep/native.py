"""The compiled I/O loop (csrc/ioloop.c): built at first use, loaded with cffi, or a stated fallback.

How it is built, and why this way: the loop is plain C that needs only libc (cuFile and CUDA are
reached through function pointers from the libraries gdsdiag already loaded), so it is compiled
with the system C compiler (``cc``, or ``$CC``) into a shared library and loaded with cffi in ABI
mode. No Python headers (python3-dev) are needed, and ``pip install`` stays compiler-free: the
library is built on the first sweep into a private cache directory (gdsdiag/privdir.py: root's is
/var/cache/gdsdiag, a user's ``$XDG_CACHE_HOME/gdsdiag``), named
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
import threading

from ..errors import GdsdiagError

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
    """Where the library is kept (checked on every use: gdsdiag/privdir.py)."""
    from .. import privdir

    return privdir.location()


def _compiler() -> str | None:
    """CC when set (as root: only a compiler root owns, gdsdiag/envtrust.py: its output is loaded
    as root's I/O loop), else cc, gcc or clang from PATH."""
    cc = os.environ.get("CC")
    if cc:
        from ..envtrust import program

        return program("CC", cc)
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def _build(cc: str, src: str, hdr_dir: str, dfd: int, name: str) -> str | None:
    """Compile in a new private temporary directory (mkdtemp: mode 0700, a fresh name), copy the
    result into the checked cache directory ``dfd`` under a new name (O_EXCL|O_NOFOLLOW) and rename
    it into place there; None or the error text. The compiler never writes through a path in the
    cache, so nothing swapped into the cache's path meanwhile is written or kept."""
    from .. import privdir, workdirs

    workdirs.remove_stale("gdsdiag-cc-")  # what a killed build left (SIGKILL runs no cleanup)
    with workdirs.WorkDir("gdsdiag-cc-") as tmpdir:
        built = os.path.join(tmpdir, "ioloop.so")
        try:
            r = subprocess.run(
                [cc, "-O2", "-shared", "-fPIC", "-I", hdr_dir, "-o", built, src],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if r.returncode != 0:
                err = (r.stderr or r.stdout).strip().splitlines()
                return f"{os.path.basename(cc)} failed: {err[0] if err else 'exit ' + str(r.returncode)}"
            with open(built, "rb") as f:
                privdir.replace_into(dfd, name, f.read(), 0o700)
            return None
        except (OSError, subprocess.SubprocessError) as e:
            return f"{os.path.basename(cc)} could not run: {e}"


def _load_from_cache(cc: str, src: str, hdr: str, name: str):
    """(lib, why): the library opened through a checked descriptor, built first when absent.
    A cache that breaks a rule (another owner, writable by others, a symlink) is never used."""
    from .. import privdir

    shown = os.path.join(cache_dir(), name)
    try:
        dfd = privdir.open_dir()
    except OSError as e:
        return None, f"no private cache directory for the I/O loop ({e.strerror or e})"
    try:
        try:
            fd = privdir.open_file(dfd, name, shown)
        except FileNotFoundError:
            why = _build(cc, src, os.path.dirname(hdr), dfd, name)
            if why is not None:
                return None, why
            fd = privdir.open_file(dfd, name, shown)
        try:
            # dlopen takes a path: /proc/self/fd/N is the inode checked above, not the name
            lib = ffi().dlopen(privdir.fd_path(fd))
        finally:
            os.close(fd)
        if lib.gd_abi_version() != 5:
            return None, f"{shown} is from another gdsdiag version"
        return lib, None
    except privdir.Refused as e:
        return None, f"refused the cached I/O loop: {e}"
    except OSError as e:
        return None, f"cannot load {shown}: {e}"
    finally:
        os.close(dfd)


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
        try:
            cc, refused = _compiler(), None
        except GdsdiagError as e:  # CC names a compiler another user owns: said in every result
            cc, refused = None, f"{e.cause} — {e.fix}"
        if refused:
            why = refused
        elif not os.path.exists(src):
            why = f"{src} is not installed"
        elif cc is None:
            why = "no C compiler (install gcc: apt-get install gcc) to build the I/O loop"
        else:
            h = hashlib.sha256()
            for p in (src, hdr):
                with open(p, "rb") as f:
                    h.update(f.read())
            h.update(os.path.realpath(cc).encode())
            lib, why = _load_from_cache(cc, src, hdr, f"ioloop-{h.hexdigest()[:16]}.so")
    with _lock:
        _state["lib"], _state["why"] = lib, why
    return lib, why


def have_uring() -> bool:
    lib, _ = load()
    return bool(lib is not None and lib.gd_have_uring())
