"""The command line of a Python child that runs gdsdiag's own code.

``python -m gdsdiag.x`` puts the current directory first on the child's ``sys.path``, ahead of
PYTHONPATH and site-packages: run in a directory holding a ``gdsdiag/`` package (a user's
checkout, or a directory another user wrote), the child imported that package instead of the one
running, so a root ``gdsdiag cufile`` ran that directory's code as root, and a sweep's worker
processes ran another checkout's loop (issue 46, found measuring the sweep). The child made here
has the running package's parent directory where ``-c`` would put the current one.
"""

from __future__ import annotations

import os
import sys

_BOOT = (
    "import sys, runpy; sys.path[0] = {root!r}; sys.argv[0] = {module!r}; "
    "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
)


def module_argv(module: str, *args: str) -> list[str]:
    """argv that runs ``module`` as ``python -m module args`` would, from this gdsdiag."""
    import gdsdiag

    root = os.path.dirname(os.path.dirname(os.path.abspath(gdsdiag.__file__)))
    return [sys.executable, "-c", _BOOT.format(root=root, module=module), *args]
