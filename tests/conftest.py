import os
import sys
import tarfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# GDSDIAG_TEST_INSTALLED=1 (set by tests/run.sh): the suite runs against the installed wheel, from a
# directory outside the checkout, and the CLI is the installed `gdsdiag` console script.
INSTALLED = os.environ.get("GDSDIAG_TEST_INSTALLED") == "1"


def _gdsdiag_argv() -> list[str]:
    if not INSTALLED:     # a developer's run from the checkout: the checkout's code
        return [sys.executable, "-m", "gdsdiag"]
    script = os.path.join(os.path.dirname(sys.executable), "gdsdiag")
    if not os.access(script, os.X_OK):
        raise RuntimeError(f"the gdsdiag console script is missing beside {sys.executable}")
    return [script]


GDSDIAG = _gdsdiag_argv()   # how every test runs the command line: the console script users run
FIXTURES = os.path.join(HERE, "fixtures")
CORPUS = os.path.join(FIXTURES, "corpus")   # verbatim copy of ../shared/corpus (see its README)


def corpus(*parts: str) -> str:
    return os.path.join(CORPUS, *parts)


@pytest.fixture(scope="session")
def hwloc_trees(tmp_path_factory):
    """hwloc's real Linux sysfs snapshots, unpacked once per session: name -> root directory."""
    out = {}
    base = tmp_path_factory.mktemp("hwloc")
    d = corpus("hwloc-sysfs")
    for f in sorted(os.listdir(d)):
        if f.endswith(".tar.bz2"):
            name = f[:-len(".tar.bz2")]
            dest = base / name
            dest.mkdir()
            with tarfile.open(os.path.join(d, f)) as t:
                t.extractall(dest, filter="fully_trusted")
            (top,) = os.listdir(dest)
            out[name] = str(dest / top)
    return out
