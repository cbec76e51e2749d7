"""What a benchmark figure depends on, printed with it: the machine, its load, the Python build,
where the input lives and whether the children start from cached bytecode."""

from __future__ import annotations

import os
import platform
import sys


def fs_of(path: str) -> str:
    """The mount holding ``path``: 'ext4 on /dev/vda mounted at /' (from /proc/self/mountinfo)."""
    path = os.path.realpath(path)
    best = ("", "?", "?")
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mnt = left.split()[4]
                fstype, source = right.split()[:2]
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
                    best = (mnt, fstype, source)
    except OSError:
        pass
    return f"{best[1]} on {best[2]} mounted at {best[0] or '?'}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def child_env(cache_dir: str) -> dict[str, str]:
    """Children start as an installed gdsdiag does (pip writes .pyc at install): bytecode cached
    under ``cache_dir`` (PYTHONPYCACHEPREFIX) after a first warm-up run, even where the caller's
    environment sets PYTHONDONTWRITEBYTECODE (then every start would recompile ~130 modules)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache_dir
    return env


_BUILD = (
    "import platform, sys, sysconfig; v = sysconfig.get_config_var; "
    "shared = 'libpython' in open('/proc/self/maps').read(); "
    'print(f"{platform.python_implementation()} {platform.python_version()} ({sys.executable}; "'
    "f\"libpython {'a shared library' if shared else 'linked in'}, \""
    "f\"CFLAGS {'-O3' if '-O3' in (v('CFLAGS') or '') else 'no -O3'})\")"
)


def python_build(python: str = sys.executable) -> str:
    """'CPython 3.11.2 (/usr/bin/python3; libpython linked in, CFLAGS no -O3)': the interpreter the
    children run, which decides much of a figure (whether libpython is a shared library, mapped in
    /proc/self/maps, costs every call an indirection: Debian links it into /usr/bin/python3.11)."""
    import subprocess

    r = subprocess.run([python, "-c", _BUILD], capture_output=True, text=True, check=False)
    return r.stdout.strip() or f"{python}: {r.stderr.strip()[-200:]}"


def describe(input_path: str | None = None, python: str = sys.executable) -> dict[str, object]:
    return {
        "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} {platform.release()}",
        "python": python_build(python),
        "input_storage": fs_of(input_path) if input_path else None,
        "children_bytecode": "cached (PYTHONPYCACHEPREFIX, warm-up run first)",
        "load_average_before": load(),
    }
