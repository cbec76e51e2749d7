"""Load libcufile with cffi in ABI mode (dlopen): no compiler or CUDA headers needed.

Search order (say which one was used): explicit path / GDSDIAG_LIBCUFILE, the nvidia-cufile wheel,
CUDA_HOME and /usr/local/cuda*, the linker cache — ``candidates`` (``platform/libcufile.locate`` reports
the same search for check and trace).
Before the first dlopen, CUFILE_LOGFILE_PATH is pointed at a gdsdiag log so libcufile never writes
cufile.log into the user's working directory (its default), unless the user set it already.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import GdsdiagError, UsageError
from ..extras import install_command
from ._types import CuFileLib

_lock = threading.Lock()
_loaded: Library | None = None


def cdef_text() -> str:
    """The declarations in csrc/cufile_cdef.h (installed as package data gdsdiag._csrc)."""
    try:
        from importlib.resources import files

        return files("gdsdiag._csrc").joinpath("cufile_cdef.h").read_text()
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(os.path.join(here, "csrc", "cufile_cdef.h")) as f:
            return f.read()


LOG_REFUSED: str | None = None  # why libcufile's log went to /dev/null (default_log_path)


def default_log_path() -> str:
    """Where libcufile writes cufile.log: ``$GDSDIAG_LOG_DIR``, else gdsdiag's private cache
    directory (privdir: ``/var/cache/gdsdiag`` as root, never a user's HOME under ``sudo -E``;
    ``~/.cache/gdsdiag`` otherwise), checked by privdir's rules (every component without a
    symlink, owned by root or us, the directory itself ours and 0700). The file is made here, 0600,
    and checked (regular, ours, one link), so libcufile appends to it and never writes through a
    name someone else planted. A directory that fails a rule (or cannot be made) gives
    /dev/null and the reason in LOG_REFUSED (the old fallback was a shared /tmp/cufile.log)."""
    global LOG_REFUSED
    from .. import privdir

    base = os.environ.get("GDSDIAG_LOG_DIR") or None
    top = os.path.abspath(base or privdir.location())
    try:
        dfd = privdir.open_dir(base=top)
        try:
            os.close(privdir.open_file(dfd, "cufile.log", f"{top}/cufile.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT))
        finally:
            os.close(dfd)
    except OSError as e:
        LOG_REFUSED = f"{top}: {e}"
        return os.devnull
    LOG_REFUSED = None
    return os.path.join(top, "cufile.log")


@dataclass
class Library:
    ffi: Any  # cffi.FFI (cffi ships no type information)
    lib: CuFileLib  # the dlopened libcufile, typed function by function in _types.py
    path: str
    found_via: str
    version: int  # cuFileGetVersion(): 1000*major + 10*minor (1150 = 1.15)
    log_path: str

    @property
    def stats_types(self) -> tuple[str, str, str]:
        """The statistics layouts of this version: level 1 grew by the readv/writev counters in 1.19."""
        if self.version >= 1190:
            return "CUfileStatsLevel1_v1190_t", "CUfileStatsLevel2_v1190_t", "CUfileStatsLevel3_v1190_t"
        return "CUfileStatsLevel1_t", "CUfileStatsLevel2_t", "CUfileStatsLevel3_t"

    def has(self, symbol: str) -> bool:
        try:
            getattr(self.lib, symbol)
            return True
        except (AttributeError, NotImplementedError):
            return False


def _site_dirs() -> list[str]:
    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]


def candidates(explicit: str | None = None) -> list[tuple[str, str]]:
    """(how, path) in the order the bindings use: explicit, wheel, CUDA_HOME / /usr/local/cuda*, linker."""
    out: list[tuple[str, str]] = []
    env = explicit or os.environ.get("GDSDIAG_LIBCUFILE")
    if env:
        out.append(("explicit" if explicit else "GDSDIAG_LIBCUFILE", env))
    for site in _site_dirs():
        for sub in ("nvidia/cu13/lib", "nvidia/cufile/lib", "nvidia/cu12/lib"):
            for name in ("libcufile.so.0", "libcufile.so.1", "libcufile.so"):
                p = os.path.join(site, sub, name)
                if os.path.exists(p):
                    out.append((f"nvidia-cufile wheel ({sub})", p))
                    break
    roots = []
    if os.environ.get("CUDA_HOME"):
        roots.append(os.environ["CUDA_HOME"])
    roots += sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    for r in roots:
        for sub in ("lib64", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            for name in ("libcufile.so.0", "libcufile.so"):
                p = os.path.join(r, sub, name)
                if os.path.exists(p):
                    out.append((f"CUDA toolkit ({r})", p))
                    break
    try:
        ld = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
        for line in ld.splitlines():
            m = re.search(r"libcufile\.so(\.\d+)?\s.*=>\s*(\S+)", line)
            if m:
                out.append(("linker cache (ldconfig -p)", m.group(2)))
    except (OSError, subprocess.SubprocessError):
        pass
    seen, uniq = set(), []
    for how, p in out:
        real = os.path.realpath(p)
        if real not in seen:
            seen.add(real)
            uniq.append((how, p))
    return uniq


def _environment_checked(how: str, lib_path: str, explicit: str | None) -> str:
    """A library the environment named (GDSDIAG_LIBCUFILE, a CUDA_HOME), as root, only if root owns
    it and its directories and no one else can write them (gdsdiag/envtrust.py: under sudo -E a
    user's library ran its constructor as root). The parent hands its choice to the cuFile probe
    children in GDSDIAG_LIBCUFILE, so they check it again, as the same rule."""
    from ..envtrust import trusted

    env = os.environ.get("GDSDIAG_LIBCUFILE")
    if how == "GDSDIAG_LIBCUFILE" or (how == "explicit" and env and explicit == env):
        return trusted("GDSDIAG_LIBCUFILE", lib_path, "load")
    home = os.environ.get("CUDA_HOME")
    if home and how == f"CUDA toolkit ({home})":
        return trusted("CUDA_HOME", lib_path, "load")
    return lib_path


def load(path: str | None = None) -> Library:
    """The process-wide libcufile (loaded once; a different ``path`` later is an error)."""
    global _loaded
    with _lock:
        if _loaded is not None:
            if path and os.path.realpath(path) != os.path.realpath(_loaded.path):
                raise GdsdiagError(f"libcufile already loaded from {_loaded.path}", "use one libcufile per process")
            return _loaded
        try:
            import cffi
        except ImportError:
            raise GdsdiagError("the cuFile bindings need cffi", install_command("cufile")) from None
        cands = candidates(path)
        if not cands:
            raise GdsdiagError(
                "libcufile not found (wheel, CUDA_HOME, /usr/local/cuda*, ldconfig)",
                f"{install_command('cufile')}, or pass the library path (GDSDIAG_LIBCUFILE=/path/libcufile.so.0)",
            )
        how, lib_path = cands[0]
        if path and not os.path.exists(path):
            raise UsageError(f"{path} does not exist", "pass the path of libcufile.so.0")
        lib_path = _environment_checked(how, lib_path, path)
        log = os.environ.get("CUFILE_LOGFILE_PATH")
        if not log:
            log = default_log_path()
            os.environ["CUFILE_LOGFILE_PATH"] = log
        ffi = cffi.FFI()
        ffi.cdef(cdef_text())
        try:
            lib = ffi.dlopen(lib_path)
        except OSError as e:
            raise GdsdiagError(f"cannot load {lib_path}: {e}", "check the file and its dependencies (ldd)") from None
        v = ffi.new("int *")
        try:
            get_version = lib.cuFileGetVersion
        except AttributeError:  # (cffi: the symbol is not in the library; was an internal error)
            raise GdsdiagError(
                f"libcufile version unknown: {lib_path} has no cuFileGetVersion "
                "(not a libcufile, or one older than 1.15)",
                "point GDSDIAG_LIBCUFILE at libcufile.so.0 of nvidia-cufile >= 1.15",
            ) from None
        st = get_version(v)
        if st.err != 0:
            raise GdsdiagError(f"cuFileGetVersion failed with {st.err}", f"see {log}")
        if v[0] < 1150:
            raise GdsdiagError(
                f"libcufile {v[0]} at {lib_path} is older than 1.15 (1150)",
                "install nvidia-cufile >= 1.15 (the stats and parameter calls need it)",
            )
        _loaded = Library(ffi, lib, lib_path, how, v[0], log)
        return _loaded


def log_tail(lines: int = 15) -> str:
    """The end of cufile.log, for error messages."""
    path = (_loaded.log_path if _loaded else os.environ.get("CUFILE_LOGFILE_PATH")) or ""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
