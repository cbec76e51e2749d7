"""Issue 24, items 3 and 8: outputs are opened once (O_EXCL|O_NOFOLLOW) and written through that
descriptor, complete or removed; a planted file is never deleted; snapshots are 0600; leftovers
of killed runs are found and removed by the next run, and a live run's files are not."""

import errno
import os
import stat
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from gdsdiag import outfile
from gdsdiag.commands.sweep import _write_outputs
from gdsdiag.commands.validate import PROM_MARK, write_prom
from gdsdiag.errors import GdsdiagError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _report():
    return SimpleNamespace(
        points=[],
        config=SimpleNamespace(modes=[], block_sizes=[4096], directory="/d"),
        ceilings={},
        machine={"hostname": "h", "date": "d"},
    )


def test_symlink_planted_after_the_check_is_not_written_through(tmp_path):
    """`sweep --plot` checked the name at start-up and savefig()ed the path at the end."""
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    for name in ("out.csv", "out.png"):
        os.symlink(victim, tmp_path / name)
    with pytest.raises(GdsdiagError, match="symlink"):
        _write_outputs(_report(), str(tmp_path / "out.csv"), str(tmp_path / "out.png"))
    assert victim.read_text() == "keep\n"
    assert os.path.islink(tmp_path / "out.csv") and os.path.islink(tmp_path / "out.png")


def test_csv_and_plot_are_written_whole(tmp_path):
    pytest.importorskip("matplotlib")
    _write_outputs(_report(), str(tmp_path / "o.csv"), str(tmp_path / "o.png"))
    assert (tmp_path / "o.csv").read_text().startswith("mode,")
    assert (tmp_path / "o.png").read_bytes()[:4] == b"\x89PNG"


def test_a_full_disk_leaves_no_file_to_block_the_rerun(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(GdsdiagError, match="no space left"):
        outfile.write_new_bytes(str(tmp_path / "v.json"), "--json", b"{}")
    assert not (tmp_path / "v.json").exists()
    monkeypatch.undo()
    outfile.write_new_bytes(str(tmp_path / "v.json"), "--json", b"{}")  # the rerun
    assert (tmp_path / "v.json").read_bytes() == b"{}"


def test_real_full_filesystem(tmp_path):
    """On a real full filesystem (a 64 KiB tmpfs), where the kernel can mount one."""
    mnt = tmp_path / "m"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with pytest.raises(GdsdiagError, match="no space left"):
            outfile.write_new_bytes(str(mnt / "big.csv"), "--csv", b"x" * (1 << 20))
        assert os.listdir(mnt) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_prom_never_deletes_a_planted_name_and_refuses_a_fifo(tmp_path):
    prom = tmp_path / "v.prom"
    # the old fixed temporary name: planted, it made the O_EXCL open fail and was then deleted
    planted = tmp_path / f"v.prom.gdsdiag-tmp-{os.getpid()}"
    planted.write_text("someone's\n")
    write_prom(str(prom), PROM_MARK + "x 1\n")
    assert planted.read_text() == "someone's\n"
    write_prom(str(prom), PROM_MARK + "x 2\n")  # its own textfile is replaced
    assert prom.read_text().endswith("x 2\n")
    assert [n for n in os.listdir(tmp_path) if "gdsdiag-tmp" in n] == [planted.name]
    fifo = tmp_path / "f.prom"
    os.mkfifo(fifo)
    t = time.monotonic()
    with pytest.raises(GdsdiagError, match="not a regular file"):
        write_prom(str(fifo), PROM_MARK)
    assert time.monotonic() - t < 5


def test_failed_open_deletes_nothing(tmp_path):
    f = tmp_path / "taken"
    f.write_text("mine\n")
    with pytest.raises(GdsdiagError, match="exists"):
        outfile.write_new_bytes(str(f), "--json", b"x")
    assert f.read_text() == "mine\n"


def test_leftovers_of_a_killed_run_are_removed_and_a_live_ones_kept(tmp_path):
    """A child holds a work file as a run does, and is SIGKILLed; another stays alive."""
    code = (
        "import os, sys, time; from gdsdiag import outfile;"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600);"
        "os.write(fd, b'\\x1f\\x8b'); outfile.hold(fd); print('held', flush=True); time.sleep(60)"
    )
    dead, live = tmp_path / ".a.tar.gz.1.partial", tmp_path / ".b.tar.gz.2.partial"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(p)], stdout=subprocess.PIPE, cwd=REPO) for p in (dead, live)
    ]
    try:
        for p in procs:
            assert p.stdout.readline() == b"held\n"
        procs[0].kill()
        procs[0].wait()
        other = tmp_path / ".c.tar.gz.3.partial"
        other.write_text("not a gzip: not ours\n")
        from gdsdiag import snapshot

        assert snapshot.remove_leftovers(str(tmp_path)) == [dead.name]
        assert live.exists() and other.exists() and not dead.exists()
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_snapshot_is_0600_and_removes_a_killed_runs_partial(tmp_path):
    from check_fixtures import unpack_h200

    from gdsdiag import snapshot

    root = unpack_h200(str(tmp_path / "root"))
    stale = tmp_path / ".old.tar.gz.abcdef.partial"
    stale.write_bytes(b"\x1f\x8b" + b"\0" * 100)  # a killed run's: no lock held
    out = tmp_path / "s.tar.gz"
    snapshot.create(str(out), root=root, bundle=False)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert not stale.exists()
    assert [n for n in os.listdir(tmp_path) if n.endswith(".partial")] == []


def test_sweep_file_of_a_killed_run_is_removed(tmp_path):
    from gdsdiag.sweep import files

    code = (
        "import sys, time; from gdsdiag.sweep import files; sf = files.SweepFile(sys.argv[1], 4096);"
        "print(sf.path, flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, cwd=REPO)
    try:
        path = p.stdout.readline().decode().strip()
        assert os.path.exists(path)
        assert files.remove_leftovers(str(tmp_path)) == []  # alive: kept
        p.kill()
        p.wait()
        assert os.path.exists(path)  # SIGKILL: nothing of its own ran
        assert files.remove_leftovers(str(tmp_path)) == [os.path.basename(path)]
    finally:
        p.kill()
        p.wait()


# -- every output writer of the CLI on a real full filesystem, and its mode -----------------------

H200 = os.path.join(REPO, "tests", "fixtures", "snapshots", "h200-vm-2026-11-29.tar.gz")


@pytest.fixture
def full_fs(tmp_path):
    """A 64 KiB tmpfs filled to the last page (root: mount)."""
    mnt = tmp_path / "m"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        with open(mnt / "fill", "wb") as f:
            try:
                f.write(b"\0" * (1 << 20))
            except OSError:
                pass
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def _gdsdiag(*args, cwd=None):
    from conftest import GDSDIAG

    return subprocess.run([*GDSDIAG, *args], capture_output=True, text=True, cwd=cwd or REPO, timeout=120)


def _h200_tree(tmp_path):
    import tarfile

    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(H200) as t:
        # (our own committed snapshot; extraction filters exist from Python 3.11.4 / 3.10.12 only)
        t.extractall(root, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    return str(root)


WRITERS = {
    "validate --json": lambda out, tmp: ["validate", "--from", H200, "--json", out],
    "validate --junit": lambda out, tmp: ["validate", "--from", H200, "--junit", out],
    "validate --prom": lambda out, tmp: ["validate", "--from", H200, "--prom", out],
    "snapshot -o": lambda out, tmp: ["snapshot", "--root", _h200_tree(tmp), "-o", out],
    "sweep --csv": lambda out, tmp: [
        "sweep",
        "--dir",
        str(tmp),
        "--size",
        "8M",
        "--bs",
        "4k",
        "--threads",
        "1",
        "--rw",
        "read",
        "--mode",
        "host",
        "--time",
        "0.2s",
        "--csv",
        out,
    ],  # fmt: skip
    "trace --record": lambda out, tmp: [
        "trace",
        "--record",
        out,
        "--",
        "dd",
        "if=/dev/zero",
        f"of={tmp}/dd",
        "bs=4k",
        "count=5000",
    ],
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_output_on_a_full_disk_is_one_line_and_leaves_nothing(full_fs, tmp_path, writer):
    """Issue 24 item 8: a full disk left 0-byte --json/--csv outputs (the rerun was then refused
    'exists'), `trace --record` and `snapshot -o` ended in an OSError traceback. Each writer the
    CLI has, on a real full tmpfs: exit 3, one line naming the file and ENOSPC, nothing left there."""
    if writer == "trace --record":
        from conftest import bcc_unavailable

        if bcc_unavailable():
            pytest.skip(bcc_unavailable())
    out = str(full_fs / "out")
    r = _gdsdiag(*WRITERS[writer](out, tmp_path))
    assert r.returncode == 3, (r.returncode, r.stderr[-500:])
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"gdsdiag: error: cannot write {out}") and "ENOSPC" in last, r.stderr[-500:]
    assert "Traceback" not in r.stderr
    assert sorted(os.listdir(full_fs)) == ["fill"]


@pytest.mark.parametrize(
    "writer", ["validate --json", "validate --junit", "snapshot -o", "sweep --csv", "trace --record"]
)
def test_outputs_holding_node_data_are_0600(tmp_path, writer):
    """Reports, snapshots and recordings name the node's hosts, devices, processes and paths:
    owner-only (the Prometheus textfile and NFD's feature file stay 0644, read by those daemons)."""
    if writer == "trace --record":
        from conftest import bcc_unavailable

        if bcc_unavailable():
            pytest.skip(bcc_unavailable())
    out = str(tmp_path / "out")
    r = _gdsdiag(*WRITERS[writer](out, tmp_path))
    assert r.returncode in (0, 1, 2), r.stderr[-500:]
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_prom_textfile_stays_readable_by_node_exporter(tmp_path):
    out = str(tmp_path / "v.prom")
    r = _gdsdiag("validate", "--from", H200, "--prom", out)
    assert r.returncode in (0, 1, 2) and stat.S_IMODE(os.stat(out).st_mode) == 0o644


def test_diff_from_stdin_leaves_nothing_in_tmpdir_even_when_killed(tmp_path):
    """`diff A -` kept stdin in a named file of TMPDIR: a SIGKILL left it there for good. It is now
    an unnamed file (unlinked at once, read through /proc/self/fd), so no moment of the run leaves
    a name behind: killed at several points, TMPDIR stays empty."""
    import signal

    from conftest import GDSDIAG

    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    for delay in (0.2, 0.4, 0.6, 0.9, None):
        with open(H200, "rb") as stdin:
            p = subprocess.Popen([*GDSDIAG, "diff", H200, "-"], stdin=stdin, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=env, cwd=REPO)  # fmt: skip
            if delay is not None:
                time.sleep(delay)
                p.send_signal(signal.SIGKILL)
            p.wait(timeout=60)
        assert os.listdir(tmpdir) == [], (delay, os.listdir(tmpdir))
    assert p.returncode == 0
