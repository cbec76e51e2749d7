"""Open the cuFile driver in a child process with a timeout.

libcufile 1.19/1.20 spin forever in cuFileDriverOpen() when libcuda.so.1 is missing (1.15 returns
5033 at once; ../shared/research/cufile-kvikio.md §1.8), so anything that may meet a machine without
a CUDA driver asks a child first and reports a hang by name instead of hanging itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def probe_driver_open(timeout_s: float = 20.0, library_path: str | None = None) -> dict:
    env = dict(os.environ)
    if library_path:
        env["GDSDIAG_LIBCUFILE"] = library_path
    try:
        r = subprocess.run(
            [sys.executable, "-m", "gdsdiag.cufile.probe"], capture_output=True, text=True, timeout=timeout_s, env=env
        )
    except subprocess.TimeoutExpired:
        return {
            "ok": False,
            "hung": True,
            "error": f"cuFileDriverOpen did not return within {timeout_s:g} s "
            "(libcufile 1.19/1.20 spin when libcuda.so.1 is missing: install the NVIDIA driver)",
        }
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {
            "ok": False,
            "hung": False,
            "error": f"probe process failed (rc {r.returncode}): {r.stderr.strip()[-300:]}",
        }


def _main() -> None:
    from ._lib import load, log_tail
    from .driver import Driver
    from .errors import CuFileError

    out: dict = {"ok": False, "hung": False}
    try:
        L = load(os.environ.get("GDSDIAG_LIBCUFILE"))
        out.update(library=L.path, version=L.version)
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
