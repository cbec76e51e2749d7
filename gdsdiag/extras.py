"""The one place that says how to install an extra of gdsdiag (``[plot]``, ``[exporter]``, ...).

gdsdiag is not on PyPI and a Debian/Ubuntu box has no global pip (PEP 668), so ``pip install
'gdsdiag[plot]'`` works nowhere. The fix names the pip of the environment this gdsdiag runs in
(``sys.executable -m pip``) and what gdsdiag was installed from: the checkout (``pip install .``,
recorded in the install's direct_url.json, PEP 610) or, where that is gone (a wheel built in a
temporary directory), the extra's own requirements, read from the installed metadata.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import sysconfig
from urllib.parse import unquote, urlparse

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# the extras as setup.py declares them: for a gdsdiag run from a checkout with no install metadata
FALLBACK_REQUIREMENTS = {
    "plot": ["matplotlib>=3.5"],
    "exporter": ["prometheus-client>=0.16"],
    "nvml": ["nvidia-ml-py>=12"],
    "cufile": ["nvidia-cufile"],
    "cu12": ["cupy-cuda12x", "kvikio-cu12", "nvidia-cufile-cu12", "nvidia-ml-py>=12"],
    "cu13": ["cupy-cuda13x", "kvikio-cu13", "nvidia-cufile", "nvidia-ml-py>=12"],
}


def _direct_url() -> dict:
    """The install's direct_url.json (PEP 610): where pip took gdsdiag from; {} when not recorded."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        text = distribution("gdsdiag").read_text("direct_url.json")
    except (ImportError, PackageNotFoundError, OSError):
        return {}
    try:
        doc = json.loads(text or "{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def install_source() -> str | None:
    """What ``pip install`` can take gdsdiag from again, if it is still there: the checkout this
    gdsdiag runs from, or the one (or the wheel) it was installed from."""
    checkout = os.path.dirname(PACKAGE_DIR)
    if os.path.isfile(os.path.join(checkout, "setup.py")):  # run from a checkout (or an editable install)
        return checkout
    url = str(_direct_url().get("url", ""))
    if url.startswith("file://"):
        path = unquote(urlparse(url).path)
        if os.path.exists(path):
            return path
    return None


def _requirements(extra: str) -> list[str]:
    """The extra's requirements from the installed metadata (setup.py's table where there is none)."""
    try:
        from importlib.metadata import PackageNotFoundError, requires

        reqs = requires("gdsdiag") or []
    except (ImportError, PackageNotFoundError):
        reqs = []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    found = [r.split(";", 1)[0].strip() for r in reqs if marker.search(r)]
    return found or FALLBACK_REQUIREMENTS.get(extra, [])


def _externally_managed() -> bool:
    """The distribution's own Python outside a venv: its pip refuses to install (PEP 668)."""
    if sys.prefix != sys.base_prefix:
        return False
    return os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))


def install_command(extra: str) -> str:
    """The fix text for a missing extra: one command, with this environment's pip."""
    if _externally_managed():
        return (
            f"install gdsdiag with its [{extra}] extra in a venv, as README.md does "
            f"(~/.gdsdiag/bin/pip install '.[{extra}]' in the checkout): this Python's pip is the distribution's"
        )
    src = install_source()
    if src is not None:
        return pip_command([f"{src}[{extra}]"])
    return pip_command(_requirements(extra)) + f"  (the [{extra}] extra's requirements)"


def pip_command(requirements: list[str]) -> str:
    """pip install of these requirements into the environment this gdsdiag runs in."""
    return f"{shlex.quote(sys.executable)} -m pip install " + " ".join(shlex.quote(r) for r in requirements)
