"""A file's major page faults, counted by the trace and held against the traced program's own count
(issue 45: major faults per GiB where a load was fault-bound). Live: a real file on this machine's disk,
the page cache dropped first (/proc/sys/vm/drop_caches, root), mapped and read a page at a time by a
program that reports getrusage's ru_majflt around its own loop. The trace counts the perf software event
page-faults-major, which the kernel raises where it adds to the task's maj_flt (mm/memory.c
mm_account_fault), so the two agree to the fault."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from conftest import LIVE_MARKS

pytestmark = LIVE_MARKS

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable  # not a pyenv shim
MiB = 1 << 20

# MADV_RANDOM: no readahead, so each page is a fault that waits for the disk (a fault-bound load);
# NORMAL: the kernel's readahead brings most pages in ahead of the faults (a few major faults)
LOADER = r"""
import mmap, os, random, resource, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
if sys.argv[2] == "random":
    m.madvise(mmap.MADV_RANDOM)
pages = list(range(0, len(m), 4096))
random.Random(7).shuffle(pages)
before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
s = 0
for i in pages:
    s += m[i]
print("majflt", resource.getrusage(resource.RUSAGE_SELF).ru_majflt - before, flush=True)
"""


@pytest.fixture
def datadir():
    d = os.path.realpath(tempfile.mkdtemp(prefix="gdsdiag-majflt-", dir="/var/tmp"))  # a real disk
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _trace(path: str, advice: str) -> tuple[int, dict, str]:
    """(the program's own major faults, the file's row, the text view's how line) of one traced load
    of PATH from a cold page cache."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")
    env = {**os.environ, "PYTHONPATH": os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--", PY, "-c", LOADER, path, advice],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    own = next(int(x.split()[1]) for x in r.stdout.splitlines() if x.startswith("majflt "))
    summary = next(json.loads(x) for x in r.stdout.splitlines() if x.startswith('{"type": "summary"'))
    assert any("page-faults-major" in a for a in summary["probes_attached"]), summary["probes_not_attached"]
    (row,) = [f for f in summary["files"] if f["path"] == path]
    return own, row, summary


@pytest.mark.skipif(os.geteuid() != 0, reason="drop_caches and the trace need root")
def test_a_fault_bound_loads_major_faults_are_the_programs_own_count(datadir):
    path = os.path.join(datadir, "weights.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(16 * MiB))
        f.flush()
        os.fsync(f.fileno())
    own, row, _ = _trace(path, "random")
    assert own >= 1024, f"{own} major faults: the page cache was not cold, or readahead ran"  # (4096 pages)
    assert row["major_faults"] == own
    mapped = row["bytes"]  # (every page came from the disk: no CUDA copy, the fills are its bytes)
    assert row["page_cache_hit"] == 0.0
    assert row["major_faults_per_gib"] == pytest.approx(own / (mapped / (1 << 30)), rel=1e-3)
    assert row["mechanism"].startswith("mmap page faults")

    # readahead on: far fewer faults for the same bytes, still the program's own count
    own2, row2, _ = _trace(path, "normal")
    assert row2["major_faults"] == own2
    assert own2 < own / 4
