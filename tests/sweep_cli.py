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
