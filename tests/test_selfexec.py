"""gdsdiag's Python children run gdsdiag's own code, never a `gdsdiag/` package of the directory it
was started in (gdsdiag/selfexec.py). With `python -m` they did: a root `gdsdiag cufile` in a
directory another user wrote ran that user's code as root, and a sweep's worker processes started
in another checkout ran that checkout's I/O loop (issue 46)."""

import os
import subprocess

import pytest
from conftest import GDSDIAG, live


@pytest.fixture()
def planted(tmp_path):
    """A directory holding a `gdsdiag` package whose every child module leaves a mark."""
    pkg = tmp_path / "gdsdiag"
    mark = tmp_path / "RAN-FROM-CWD"
    for sub in ("", "cufile", "sweep", "validate"):
        d = pkg / sub
        d.mkdir(parents=True, exist_ok=True)
        (d / "__init__.py").write_text(f"open({str(mark)!r}, 'a').write('{sub or 'gdsdiag'}\\n')\n")
    for mod in ("cufile/probe.py", "sweep/worker_process.py", "validate/proof_probe.py"):
        (pkg / mod).write_text(f"open({str(mark)!r}, 'a').write('{mod}\\n')\n")
    return tmp_path, mark


def _in(cwd, *args, timeout=120):
    """gdsdiag started in ``cwd``: the console script (installed: it never imports from the cwd), or
    from the checkout with the checkout first on the path (as the console script has its own)."""
    argv = GDSDIAG
    if GDSDIAG[1:2] == ["-m"]:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        boot = f"import sys; sys.path[0] = {repo!r}; from gdsdiag.__main__ import main; main()"
        argv = [GDSDIAG[0], "-c", boot]
    return subprocess.run([*argv, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_cufile_probe_child_runs_gdsdiags_own_code(planted):
    cwd, mark = planted
    r = _in(cwd, "cufile", "--timeout", "20s")
    assert r.returncode in (0, 2) and "driver open" in r.stdout, (r.returncode, r.stderr)
    assert not mark.exists(), mark.read_text()


def test_a_sweeps_worker_processes_run_gdsdiags_own_code(planted):
    cwd, mark = planted
    work = cwd / "work"
    work.mkdir()
    r = _in(
        cwd,
        *("sweep", "--dir", str(work), "--mode", "host", "--rw", "read", "--bs", "64k", "--threads", "2"),
        *("--size", "4M", "--bytes", "2M", "--workers", "process", "--json"),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert not mark.exists(), mark.read_text()


@live
def test_a_traces_node_facts_child_runs_gdsdiags_own_code(planted):
    """The trace's `gdsdiag check --json` child (trace/session.py NodeFactsReader) runs as root with
    every trace: started in a directory with a planted package, it ran that package."""
    cwd, mark = planted
    (cwd / "gdsdiag" / "__main__.py").write_text(f"open({str(mark)!r}, 'a').write('__main__\\n')\n")
    assert os.environ.get("GDSDIAG_NODE_FACTS", "1") != "0"  # (the child this is about runs)
    r = _in(cwd, "trace", "--", "sleep", "0.3")
    assert r.returncode == 0, r.stderr[-2000:]
    assert not mark.exists(), mark.read_text()
