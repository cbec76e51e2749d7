"""Nothing but the JSON document on stdout: bcc's C++ loader prints "Unable to find kernel headers..."
with std::cout (to fd 1, through C stdio's buffer), so fd 1 points at stderr while bcc compiles.
The C library's printf stands for std::cout here: the same C ``stdout`` buffer, the same fd."""

import json
import subprocess
import sys

from conftest import REPO

# a child whose "compile" prints through C stdio (buffered: stdout is a pipe) and Python's fd 1,
# between two lines of the document; then a failing one, whose exception passes through the guard
CHILD = r"""
import ctypes, json, os, sys
from gdsdiag.trace.probes.stdoutguard import stdout_to_stderr
libc = ctypes.CDLL(None)
print(json.dumps({"before": 1}))
with stdout_to_stderr():
    libc.printf(b"Unable to find kernel headers. (C stdio)\n")
    os.write(1, b"bcc on fd 1\n")
try:
    with stdout_to_stderr():
        libc.printf(b"a failed compile's words\n")
        raise RuntimeError("Failed to compile BPF module <text>")
except RuntimeError:
    pass
print(json.dumps({"after": 2}))
libc.printf(b"")  # C stdio still works on the restored fd 1
"""


def test_bccs_words_go_to_stderr_and_the_document_stays_whole():
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr
    assert [json.loads(x) for x in p.stdout.splitlines()] == [{"before": 1}, {"after": 2}], p.stdout
    assert "Unable to find kernel headers. (C stdio)" in p.stderr
    assert "bcc on fd 1" in p.stderr and "a failed compile's words" in p.stderr


def test_the_compile_is_guarded():
    """The trace's compile runs bcc.BPF inside the guard (a fake bcc that prints, then fails)."""
    child = r"""
import ctypes, json
from gdsdiag.errors import GdsdiagError
from gdsdiag.trace.probes import bpf
class FakeBcc:
    __version__ = "0"
    @staticmethod
    def BPF(text, cflags):
        ctypes.CDLL(None).printf(b"Unable to find kernel headers.\n")
        raise Exception("Failed to compile BPF module <text>")
p = bpf.Probes.offline()
p.timing = {}
try:
    p._compile_or_cached(FakeBcc, "int x;")
except GdsdiagError as e:
    print(json.dumps({"error": e.cause}))
"""
    p = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={"GDSDIAG_BPF_CACHE": "0", "PATH": "/usr/bin:/bin"},
    )
    assert "Unable to find kernel headers" in p.stderr, p.stderr
    assert "Failed to compile BPF module" in json.loads(p.stdout)["error"], p.stdout
