"""What a benchmark figure depends on, printed with it: the machine, its load, the Python build,
where the input lives and whether the children start from cached bytecode."""

from __future__ import annotations

import os
import platform
import sys
import sysconfig


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


def describe(input_path: str | None = None) -> dict[str, object]:
    return {
        "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable}; "
        f"{'shared' if sysconfig.get_config_var('Py_ENABLE_SHARED') else 'static'} libpython, "
        f"CFLAGS {'-O3' if '-O3' in (sysconfig.get_config_var('CFLAGS') or '') else 'no -O3'})",
        "input_storage": fs_of(input_path) if input_path else None,
        "children_bytecode": "cached (PYTHONPYCACHEPREFIX, warm-up run first)",
        "load_average_before": load(),
    }
