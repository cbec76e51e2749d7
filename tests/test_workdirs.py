"""Work directories a SIGKILLed run leaves (the sweep's compiler directory, validate's sweep output,
the proof's cells on the storage under test) are removed by the next run, and only those: a real
child process is killed with SIGKILL while it holds one (issue 24: leftovers of a killed run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

from gdsdiag import workdirs

HOLDER = (
    "import sys, time\n"
    "from gdsdiag.workdirs import WorkDir\n"
    "w = WorkDir(sys.argv[1], sys.argv[2])\n"
    "print(w.__enter__(), flush=True)\n"
    "time.sleep(60)\n"
)


def _killed_holder(tmp_path, prefix: str) -> str:
    """A work directory whose process died by SIGKILL (no cleanup ran), backdated past STALE_S."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, prefix, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    path = p.stdout.readline().strip()
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    old = time.time() - 2 * workdirs.STALE_S
    os.utime(path, (old, old))
    return path


def test_a_killed_runs_directory_is_removed_by_the_next_run(tmp_path):
    path = _killed_holder(tmp_path, "gdsdiag-cc-")
    assert os.path.isdir(path)
    assert workdirs.remove_stale("gdsdiag-cc-", str(tmp_path)) == [os.path.basename(path)]
    assert not os.path.exists(path)


def test_a_live_runs_young_and_foreign_look_alikes_stay(tmp_path):
    old = time.time() - 2 * workdirs.STALE_S
    with workdirs.WorkDir("gdsdiag-cc-", str(tmp_path)) as live:  # held by this process
        os.utime(live, (old, old))
        young = tempfile.mkdtemp(prefix="gdsdiag-cc-", dir=tmp_path)  # made, not yet locked: young
        target = tmp_path / "elsewhere"
        target.mkdir()
        (target / "keep").write_text("x")
        link = tmp_path / "gdsdiag-cc-link"
        link.symlink_to(target)
        plain = tmp_path / "gdsdiag-cc-file"
        plain.write_text("not a directory")
        assert workdirs.remove_stale("gdsdiag-cc-", str(tmp_path)) == []
        assert os.path.isdir(live) and os.path.isdir(young) and (target / "keep").exists() and plain.exists()
    assert not os.path.exists(live)  # and its own run removes it at the end


def test_the_sweeps_compiler_removes_a_killed_builds_directory(tmp_path, monkeypatch):
    """sweep/native._build (the C loop's compiler step) clears what a killed build left first."""
    from gdsdiag.sweep import native

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = _killed_holder(tmp_path, "gdsdiag-cc-")
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        why = native._build("/bin/false", "/dev/null", str(tmp_path), dfd, "x.so")
    finally:
        os.close(dfd)
    assert why and "failed" in why
    assert not os.path.exists(path) and not [n for n in os.listdir(tmp_path) if n.startswith("gdsdiag-cc-")]
