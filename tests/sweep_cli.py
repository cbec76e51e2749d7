"""The sweep tests' one way to run the CLI: ``sweep(dir, "--size 4M --bs 4k", *more)``."""

import os
import subprocess
import sys


def cli(*args, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "gdsdiag", *args], capture_output=True, text=True, env=e, **kw)


def sweep(directory, opts: str = "", *more, **kw):
    """``gdsdiag sweep --dir DIRECTORY`` + ``opts`` split on spaces + ``more`` as given."""
    return cli("sweep", "--dir", str(directory), *opts.split(), *more, **kw)


def start_sweep(directory, opts: str, settle: float):
    """``gdsdiag sweep`` started in the background; returns once its data file exists and
    ``settle`` more seconds have passed (into the timed point)."""
    import time

    p = subprocess.Popen(
        [sys.executable, "-m", "gdsdiag", "sweep", "--dir", str(directory), *opts.split()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 30
    while time.time() < deadline and not any(n.startswith("gdsdiag-sweep-") for n in os.listdir(directory)):
        time.sleep(0.05)
    time.sleep(settle)
    return p
