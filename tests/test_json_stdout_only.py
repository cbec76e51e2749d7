"""docs/json.md: in every --json mode stdout carries the document and nothing else, "not even what a
library prints there" (issue 46 goal 2). bcc's C++ loader writes to std::cout, bcc's Python
print()s, CUDA and cuFile libraries printf: gdsdiag cannot stop them printing, so in a JSON run fd 1
points at stderr and the document goes to a copy of the original stdout (gdsdiag/docout.py).

The library here is a real module loaded into the installed gdsdiag's interpreter by Python's own
``sitecustomize`` mechanism (PYTHONPATH): an audit hook that, when the command opens its input
file, prints the three ways a library does -- Python's print(), a raw write(2) to fd 1 and C's
printf (buffered by C stdio until exit). On the code before docout every command's stdout had the
lines in it and was no JSON."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import FIXTURES, GDSDIAG, REPO, live

SNAP = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
SNAP2 = os.path.join(FIXTURES, "snapshots", "h200x2-vm-snapshot-2026-11-30.tar.gz")
RECORDING = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")
LLAMA = os.path.join(FIXTURES, "models", "llama-3.1-70b.config.json")

# The input each command opens, as the trigger ('open' audit events of imports are .py/.so files)
NOISY_LIBRARY = """
import sys, os, ctypes
_said = []
def _hook(event, args):
    if event != "open" or _said or not isinstance(args[0], str):
        return
    if not (TRIGGER in args[0] if os.environ.get("NOISY_SUBSTRING") else args[0].endswith(TRIGGER)):
        return
    _said.append(1)
    print("a library's print()")                      # Python: sys.stdout
    os.write(1, b"a library's write(1)\\n")             # C or a child: fd 1 itself
    ctypes.CDLL(None).printf(b"a library's printf\\n")  # C stdio: buffered, flushed at exit
sys.addaudithook(_hook)
"""

CASES = {
    "topology": (["topology", "--from", SNAP, "--json"], ".tar.gz"),
    "check": (["check", "--from", SNAP, "--json"], ".tar.gz"),
    "diff": (["diff", SNAP, SNAP2, "--json"], ".tar.gz"),
    "validate --json -": (["validate", "--from", SNAP, "--json", "-"], ".tar.gz"),
    "kv": (["kv", "--model-config", LLAMA, "--gbps", "10", "--json"], ".json"),
    "explain": (
        ["explain", os.path.join(FIXTURES, "explain", "aikitoria-17-rtx5090-nvfs-map.cufile.log"), "--json"],
        ".cufile.log",
    ),
    "trace --replay": (["trace", "--replay", RECORDING, "--json"], ".jsonl.gz"),
}


def _noisy_env(tmp_path, trigger: str) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(f"TRIGGER = {trigger!r}\n" + NOISY_LIBRARY)
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=str(tmp_path) + (os.pathsep + path if path else ""))


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_a_library_prints_never_reaches_the_json_document(name, tmp_path):
    argv, trigger = CASES[name]
    p = subprocess.run(
        [*GDSDIAG, *argv], cwd=REPO, env=_noisy_env(tmp_path, trigger), capture_output=True, text=True, timeout=300
    )
    assert "a library's print()" in p.stderr, (p.returncode, p.stderr[-2000:])  # it did print, to stderr
    assert "a library's write(1)" in p.stderr and "a library's printf" in p.stderr, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    docs = [json.loads(x) for x in lines]  # every line of stdout is JSON: nothing else is there
    assert docs and "library" not in p.stdout, p.stdout[:2000]


@pytest.mark.parametrize("name", ["snapshot", "sweep"])
def test_the_same_on_the_live_node(name, tmp_path):
    """snapshot reads this node's sysfs, sweep measures a directory of it (its worker processes keep
    their own stdout to their protocol, gdsdiag/sweep/worker_process.py)."""
    data = tmp_path / "data"
    data.mkdir()
    if name == "snapshot":
        argv, trigger = ["snapshot", "-o", str(tmp_path / "node.tar.gz"), "--json"], "/sys/"
    else:
        argv = ["sweep", "--dir", str(data), "--size", "16M", "--mode", "host", "--rw", "read", "--bs", "1m"]
        argv += ["--threads", "1", "--time", "0.5s", "--json"]
        trigger = str(data)
    lib = tmp_path / "lib"
    lib.mkdir()
    env = _noisy_env(lib, trigger)
    env["NOISY_SUBSTRING"] = "1"
    p = subprocess.run([*GDSDIAG, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1, 2), p.stderr[-2000:]
    assert "a library's print()" in p.stderr, (p.returncode, p.stderr[-2000:])
    docs = [json.loads(x) for x in p.stdout.splitlines()]
    assert docs and "library" not in p.stdout, p.stdout[:2000]


@live
def test_a_traced_program_still_shares_the_users_stdout():
    """docs/trace.md: a command traced with -- shares gdsdiag's stdout. Its fd 1 is the user's stdout,
    not the stderr fd 1 points at during a --json run."""
    p = subprocess.run(
        [*GDSDIAG, "trace", "--json", "--", "sh", "-c", "echo the-program-says-hi"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "the-program-says-hi" in p.stdout.splitlines(), (p.stdout[-2000:], p.stderr[-2000:])
