import os
import tarfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
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
