"""Open the cuFile driver in a child process with a timeout.

libcufile 1.16 to 1.20 spin forever in cuFileDriverOpen() when libcuda.so.1 is missing (1.15 returns
5033 at once; ../shared/research/cufile-kvikio.md §1.8), so anything that may meet a machine without
a CUDA driver asks a child first and reports a hang by name instead of hanging itself. The child
does not even call it when it would spin: with libcufile 1.16 or later and no loadable libcuda.so.1
it answers at once, "not called" and why (measured on the CPU machine, 2026-12-01, nvidia-cufile
wheels: 1.16.1.26, 1.17.1.22, 1.18.1.6, 1.19.1.55 and 1.20.0.107 all spun until a 6 s timeout;
1.15.1.6 returned 5033 in 0.08 s).
"""

from __future__ import annotations

import json
import os
import subprocess

from ..selfexec import module_argv


def probe_driver_open(timeout_s: float = 20.0, library_path: str | None = None) -> dict:
    env = dict(os.environ)
    if library_path:
        env["GDSDIAG_LIBCUFILE"] = library_path
    try:
        r = subprocess.run(
            module_argv("gdsdiag.cufile.probe"),  # gdsdiag/selfexec.py: never the cwd's package
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {
            "ok": False,
            "hung": True,
            "error": f"cuFileDriverOpen did not return within {timeout_s:g} s "
            "(libcufile 1.16 to 1.20 spin when libcuda.so.1 is missing: install the NVIDIA driver)",
        }
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {
            "ok": False,
            "hung": False,
            "error": f"probe process failed (rc {r.returncode}): {r.stderr.strip()[-300:]}",
        }


SPINS_FROM = 1160  # cuFileGetVersion of the first release measured to spin without libcuda.so.1 (1.16.1.26)


def _would_spin(version: int) -> str:
    """Why cuFileDriverOpen would not return here ('' when it would): libcufile >= 1.19 and no
    libcuda.so.1 the dynamic loader can open (the NVIDIA driver's user-space library)."""
    import ctypes

    if version < SPINS_FROM:
        return ""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return (
            f"cuFileDriverOpen not called: libcuda.so.1 cannot be loaded ({e}); libcufile "
            f"{version // 1000}.{version % 1000 // 10} spins in it instead of failing when the NVIDIA driver "
            "is missing — install the driver, or run where a GPU is"
        )
    return ""


def _main() -> None:
    from ._lib import load, log_tail
    from .driver import Driver
    from .errors import CuFileError

    out: dict = {"ok": False, "hung": False}
    try:
        L = load(os.environ.get("GDSDIAG_LIBCUFILE"))
        out.update(library=L.path, version=L.version)
        why = _would_spin(L.version)
        if why:
            out.update(error=why, name="NOT_CALLED")  # no log tail: libcufile wrote nothing for this
            print(json.dumps(out))
            return
        with Driver(L) as drv:
            out["properties"] = drv.properties().to_json()
            out["use_count"] = drv.use_count()
        out["ok"] = True
    except CuFileError as e:
        out.update(error=str(e), code=e.code, name=e.name, log_tail=log_tail(8))
    except Exception as e:  # report, never traceback: the parent prints one line
        out.update(error=f"{type(e).__name__}: {e}")
    print(json.dumps(out))


if __name__ == "__main__":
    _main()
