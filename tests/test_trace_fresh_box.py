"""A box with no kernel headers tree for its kernel, made in a private mount namespace (an empty
tmpfs over /lib/modules: nothing of the host changes): ``gdsdiag trace --json`` stops with stdout
empty (bcc's "Unable to find kernel headers" goes to stderr) and a fix that is one command; that
command, run there, leaves a tree with which the same trace works. Needs root, bcc and unshare;
the second half an installed /usr/src/linux-headers-* tree (what the fix links rather than installs)."""

import json
import os
import shlex
import shutil
import subprocess

import pytest
from conftest import GDSDIAG

from gdsdiag.trace.probes.headers import close_headers_tree


def _why_not() -> str | None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare (a private /lib/modules)"
    try:
        from gdsdiag.trace.probes.bpf import import_bcc

        import_bcc()
    except Exception as e:
        return f"bcc unavailable: {e}"
    return None


pytestmark = [pytest.mark.live, pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))]


def _in_fresh_namespace(then: str) -> subprocess.CompletedProcess:
    trace = " ".join(shlex.quote(a) for a in [*GDSDIAG, "trace", "--json", "--", "true"])
    script = f"mount -t tmpfs none /lib/modules && {then.format(trace=trace)}"
    # no compiled-program cache: a cached program loads with no headers at all, and the compile is
    # what this is about
    env = dict(os.environ, GDSDIAG_BPF_CACHE="0")
    p = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if "cannot change root filesystem propagation" in p.stderr:  # a chroot: its / is no mount point
        pytest.skip("no private mount namespace here (a chroot): " + p.stderr.strip())
    return p


@pytest.mark.slow
def test_no_headers_tree_stdout_stays_clean_and_the_fix_works():
    p = _in_fresh_namespace("{trace}")
    assert p.returncode == 3, p.stdout + p.stderr
    assert p.stdout == "", p.stdout  # bcc's words on stderr, never before the JSON
    err = p.stderr.strip().splitlines()[-1]
    assert "no kernel headers tree" in err and "as root: " in err, p.stderr
    fix = err.split("as root: ", 1)[1]
    if close_headers_tree() is None:
        pytest.skip("no /usr/src/linux-headers-* tree here: the fix installs one (not run by a test)")
    p = _in_fresh_namespace(f"{fix} && {{trace}}")
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [json.loads(x) for x in p.stdout.splitlines()]  # every line of stdout is JSON
    assert lines[-1]["type"] == "summary", p.stdout[-2000:]


def test_bccs_library_missing_is_one_line_naming_it():
    """python3-bpfcc without its C library (libbpfcc not installed, or a kit's LD_LIBRARY_PATH
    lost): bcc's import raises OSError loading libbcc.so.0. It was 'internal error: OSError: …'
    (the GPU machine's live tests hit it); now one line naming the library and the fix. Made here by
    an empty file bound over libbcc.so.0 in a private mount namespace."""
    import ctypes.util

    lib = ctypes.util.find_library("bcc")
    path = next(
        (
            os.path.join(d, "libbcc.so.0")
            for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
            if os.path.exists(os.path.join(d, "libbcc.so.0"))
        ),
        None,
    )
    if lib is None or path is None:
        pytest.skip("no libbcc.so.0 in the usual directories to hide")
    trace = " ".join(shlex.quote(a) for a in [*GDSDIAG, "trace", "--json", "--", "true"])
    p = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", f"mount --bind /dev/null {path} && {trace}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"},
    )
    if "cannot change root filesystem propagation" in p.stderr:
        pytest.skip("no private mount namespace here (a chroot): " + p.stderr.strip())
    assert p.returncode != 0 and p.stdout == "", (p.returncode, p.stdout)
    lines = [x for x in p.stderr.strip().splitlines() if x.startswith("gdsdiag")]
    assert len(lines) == 1 and "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "bcc's library cannot be loaded" in lines[0] and "libbpfcc" in lines[0], p.stderr
