"""What the held-out capture rounds (tests/test_heldout*_captures.py) run each capture through: the
installed command line, and the nvidia-smi cross-check against a committed node snapshot."""

import json
import os
import subprocess

from conftest import FIXTURES, GDSDIAG, REPO

# a committed snapshot as the node: the nvidia-smi cross-check then lists every cell it read, the
# same way on any test machine (these matrices are never this node's, and the tool must say so)
SNAPSHOT = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")


def run(*args, env=None):
    """The command line users run (conftest.GDSDIAG), from the checkout, ENV added to this one's."""
    return subprocess.run(
        [*GDSDIAG, *args], capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})}
    )


def smi_cross_check(path):
    """(the --json document, {(row, column): level} of every cell read) of `topology --nvidia-smi
    PATH` against SNAPSHOT: exit 3, nothing compared, the text named another node's."""
    r = run("topology", "--from", SNAPSHOT, "--nvidia-smi", path, "--json")
    assert r.returncode == 3, r.stderr  # nothing compared: the text is another node's
    d = json.loads(r.stdout)
    assert d["cross_check_input"]["other_node"] and d["cross_check_input"]["compared"] == 0
    return d, {(c["row"], c["column"]): c["nvidia_smi"] for c in d["cross_check"]}


def explain_as_written(path, rc, kind, present, absent):
    """`explain -v PATH` exits RC, names the input KIND on its first line, and says each of PRESENT
    and none of ABSENT (what the capture's source shows about it)."""
    r = run("explain", "-v", path)
    assert r.returncode == rc, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].split(": ", 1)[1].startswith(kind)
    for s in present:
        assert s in r.stdout, s
    for s in absent:
        assert s not in r.stdout, s
