"""The libcufile and libcuda files a program started now may map later (dlopen), found before it
starts: the linker cache, LD_LIBRARY_PATH, the CUDA toolkit directories and the NVIDIA wheels of
the Python that will run it. Uprobes are set on a file's inode, so probes attached to these before
the program runs are live for a mapping made at any time after — no race with a short program that
dlopens libcuda and copies before the tracer could react to the mapping (kvikio does exactly that).
A copy at a path none of these name is still found when the process maps it (later, asynchronously)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

KINDS = ("libcufile.so", "libcuda.so")


def _ldconfig_paths() -> list[str]:
    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", shutil.which("ldconfig") or ""):
        if exe and os.path.exists(exe):
            try:
                out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=5).stdout
            except (OSError, subprocess.SubprocessError):
                return []
            paths = []
            for line in out.splitlines():
                name, _, path = line.strip().partition(" => ")
                if path and name.startswith(KINDS) and ("x86-64" in name or "AArch64" in name):
                    paths.append(path.strip())
            return paths
    return []


def _python_dirs(cmd: list[str] | None, env: dict) -> list[str]:
    """site-packages of the interpreter a command runs (and of an active virtualenv)."""
    prefixes = []
    if cmd:
        exe = cmd[0] if os.sep in cmd[0] else shutil.which(cmd[0], path=env.get("PATH"))
        if exe and os.path.basename(exe).startswith("python"):
            prefixes.append(os.path.dirname(os.path.dirname(os.path.abspath(exe))))
            prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(exe))))
    if env.get("VIRTUAL_ENV"):
        prefixes.append(env["VIRTUAL_ENV"])
    prefixes += [sys.prefix, sys.base_prefix]  # this interpreter's (a pyenv shim hides the program's)
    prefixes += ["/usr", "/usr/local"]
    out = []
    for pre in dict.fromkeys(prefixes):
        for sp in glob.glob(os.path.join(pre, "lib*", "python3*", "*-packages")):
            out += glob.glob(os.path.join(sp, "nvidia", "*", "lib"))
    for d in (env.get("PYTHONPATH") or "").split(os.pathsep):
        if d:
            out += glob.glob(os.path.join(d, "nvidia", "*", "lib"))
    return out


def candidate_libraries(cmd: list[str] | None = None, env: dict | None = None) -> list[str]:
    """Paths of distinct libcufile / libcuda files (one per inode), in search order."""
    env = dict(os.environ) if env is None else env
    dirs = [d for d in (env.get("LD_LIBRARY_PATH") or "").split(":") if d]
    dirs += glob.glob("/usr/local/cuda*/lib64") + glob.glob("/usr/local/cuda*/targets/*/lib")
    dirs += ["/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"]
    dirs += _python_dirs(cmd, env)
    paths = _ldconfig_paths()
    for d in dirs:
        for k in KINDS:
            paths += sorted(glob.glob(os.path.join(d, k + "*")))
    out, seen = [], set()
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        # (a toolkit's stubs/libcuda.so is a link-time stand-in, never the driver a program runs)
        if not os.path.isfile(p) or (st.st_dev, st.st_ino) in seen or "/stubs/" in p:
            continue
        seen.add((st.st_dev, st.st_ino))
        out.append(p)
    return out
