"""Snapshots from strangers (issue 13): crafted archives that escaped, read host files, exhausted
memory or answered "no findings" when gdsdiag extracted them. Each is built here with tarfile or
GNU tar; each test asserts nothing is written outside the tool's files, the run ends in bounded
time and memory, and the documented exit code (3) with one line naming the cause."""

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import pytest
from conftest import FIXTURES

from gdsdiag.errors import GdsdiagError
from gdsdiag.platform.archroot import ArchiveRoot, Limits
from gdsdiag.platform.roots import open_snapshot

H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = b"gdsdiag-snapshot 1\nrelease 6.1.0\n"


def run(*args, env_extra=None, timeout=60):
    """The CLI in a child, with its peak RSS (KiB) from wait4."""
    env = dict(os.environ, **(env_extra or {}))
    t = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "gdsdiag", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err, time.monotonic() - t


# A child's ru_maxrss starts from its parent's RSS at fork (the kernel keeps the pre-exec high-water
# mark), so pytest's own size would be measured: a small Python process in between spawns the CLI
# and reports that child's peak RSS (KiB) on its last stderr line.
RSS_WRAPPER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, st, ru = os.wait4(p.pid, 0)\n"
    "sys.stderr.write('\\nRSS %d\\n' % ru.ru_maxrss)\n"
    "sys.exit(os.waitstatus_to_exitcode(st))\n"
)


def peak_rss_kib(*args):
    """Run the CLI and return (rc, stderr, peak RSS in KiB) measured by the kernel (wait4)."""
    p = subprocess.run(
        [sys.executable, "-c", RSS_WRAPPER, sys.executable, "-m", "gdsdiag", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
        text=True,
    )
    err, _, rss = p.stderr.rpartition("\nRSS ")
    return p.returncode, err, int(rss)


def add_bytes(tar, name, data, **kw):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    for k, v in kw.items():
        setattr(ti, k, v)
    tar.addfile(ti, io.BytesIO(data))


def add_link(tar, name, target, kind=tarfile.SYMTYPE):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, target
    tar.addfile(ti)


def snapshot_with(path, build, marker=True, mode="w:gz"):
    with tarfile.open(path, mode) as tar:
        add_bytes(tar, "proc/version", b"Linux version 6.1.0-test (gcc) #1 SMP\n")
        build(tar)
        if marker:
            add_bytes(tar, "gdsdiag-snapshot.txt", MARKER)
    return str(path)


def tree_digest(d):
    out = {}
    for dp, dns, fns in os.walk(d):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            out[p] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def watched(tmp_path):
    """A victim directory and file next to the archive, and a private TMPDIR: both must be
    unchanged after gdsdiag reads the archive."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "important.txt").write_text("keep me\n")
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    before = tree_digest(str(tmp_path))
    yield tmp_path, victim, tmpdir
    after = tree_digest(str(tmp_path))
    new = {p for p in after if p not in before and not p.startswith(str(tmp_path / "archives"))}
    changed = {p for p in before if p in after and after[p] != before[p] and "/archives" not in p}
    assert not new and not changed, f"written outside the tool's files: {sorted(new | changed)}"
    assert os.listdir(tmpdir) == []


def archives(tmp_path):
    d = tmp_path / "archives"
    d.mkdir(exist_ok=True)
    return d


# -- escapes ---------------------------------------------------------------------------------------


def cve_2025_4517_shape(tar, victim_dir):
    """The published shape of CVE-2025-4517: a chain of directories with names near NAME_MAX and
    links stepping through them, so that the target of the last link exceeds PATH_MAX once
    expanded and os.path.realpath() (which the 'data' filter trusted) stops checking; a final link
    then points at the victim directory through '..' steps and a file is written through it."""
    comp = "d" * 247
    steps = "abcdefghijklmnop"
    path = ""
    for s in steps:
        ti = tarfile.TarInfo(os.path.join(path, comp))
        ti.type = tarfile.DIRTYPE
        tar.addfile(ti)
        add_link(tar, os.path.join(path, s), comp)
        path = os.path.join(path, comp)
    linkpath = os.path.join("/".join(steps), "l" * 254)
    add_link(tar, linkpath, "../" * len(steps))
    add_link(tar, "escape", linkpath + "/../../../../../../../../../../../../../../../.." + str(victim_dir))
    add_bytes(tar, "escape/important.txt", b"OVERWRITTEN\n")
    add_bytes(tar, "escape/new-file", b"CREATED\n")


def test_cve_2025_4517_long_symlink_chain_writes_nothing(watched):
    tmp_path, victim, tmpdir = watched
    snap = snapshot_with(archives(tmp_path) / "cve.tar.gz", lambda t: cve_2025_4517_shape(t, victim))
    rc, out, err, secs = run("topology", "--from", snap, "--json", env_extra={"TMPDIR": str(tmpdir)})
    assert (victim / "important.txt").read_text() == "keep me\n"
    assert not (victim / "new-file").exists()
    assert rc in (0, 1, 2) and secs < 30, err
    probs = [f["title"] for f in json.loads(out)["findings"] if f["id"] == "read-problem"]
    assert any("leaves the archive" in p or "symbolic links" in p or "below a link" in p for p in probs), probs


def test_member_names_with_dotdot_and_absolute_names_stay_inside(watched):
    tmp_path, victim, tmpdir = watched

    def build(tar):
        add_bytes(tar, "../../../../" + str(victim).lstrip("/") + "/important.txt", b"OVERWRITTEN\n")
        add_bytes(tar, str(victim) + "/abs.txt", b"ABS\n")  # absolute name: re-rooted inside

    snap = snapshot_with(archives(tmp_path) / "dotdot.tar.gz", build)
    fs = open_snapshot(snap)
    assert fs.read_text(str(victim) + "/abs.txt") == "ABS"  # inside the archive only
    assert any("climbs out of the archive" in p for p in fs.problems)
    rc, out, err, _ = run("check", "--from", snap, "--json", env_extra={"TMPDIR": str(tmpdir)})
    assert rc in (0, 1, 2), err
    assert (victim / "important.txt").read_text() == "keep me\n"


def test_proc_cmdline_link_to_a_host_file_is_not_read(watched):
    tmp_path, victim, tmpdir = watched
    secret = tmp_path / "victim" / "important.txt"
    snap = snapshot_with(
        archives(tmp_path) / "cmdline.tar.gz",
        lambda t: (
            add_link(t, "proc/cmdline", str(secret)),
            add_link(t, "proc/cpuinfo", "../../../../../../../../" + str(secret)),
        ),
    )
    rc, out, err, _ = run("topology", "--from", snap, "--json", env_extra={"TMPDIR": str(tmpdir)})
    assert "keep me" not in out and "keep me" not in err
    probs = [f["title"] for f in json.loads(out)["findings"] if f["id"] == "read-problem"]
    assert any("proc/cmdline" in p and "outside the archive" in p for p in probs), probs
    assert any("proc/cpuinfo" in p and "leaves the archive" in p for p in probs), probs


def test_cufile_json_link_to_shadow_is_not_parsed(watched, tmp_path_factory):
    tmp_path, victim, tmpdir = watched
    secret = tmp_path_factory.mktemp("host-etc") / "shadow"  # stands for /etc/shadow
    secret.write_text('{"logging": {"dir": "SECRET-HASH"}}\n')
    snap = snapshot_with(archives(tmp_path) / "shadow.tar.gz", lambda t: add_link(t, "etc/cufile.json", str(secret)))
    rc, out, err, _ = run("check", "--from", snap, "--json", "-v", env_extra={"TMPDIR": str(tmpdir)})
    assert "SECRET-HASH" not in out + err
    assert rc in (0, 1, 2), err
    (integrity,) = [r for r in json.loads(out)["checks"] if r["id"] == "snapshot.integrity"]
    assert "etc/cufile.json" in json.dumps(integrity["evidence"])
    fs = open_snapshot(snap)
    assert fs.read_bytes("/etc/cufile.json") is None
    assert any("etc/cufile.json" in p and "outside the archive" in p for p in fs.problems)


def test_hard_link_to_a_host_path_is_ignored(tmp_path):
    snap = snapshot_with(
        tmp_path / "hl.tar.gz", lambda t: add_link(t, "etc/cufile.json", "/etc/passwd", tarfile.LNKTYPE)
    )
    fs = open_snapshot(snap)
    assert fs.read_bytes("/etc/cufile.json") is None
    assert any("hard link" in p for p in fs.problems)


def test_link_loops_and_fifo_members_are_named(tmp_path):
    def build(tar):
        add_link(tar, "sys/a", "b")
        add_link(tar, "sys/b", "a")
        ti = tarfile.TarInfo("etc/cufile.json")
        ti.type = tarfile.FIFOTYPE
        tar.addfile(ti)

    fs = open_snapshot(snapshot_with(tmp_path / "loop.tar.gz", build))
    with pytest.raises(OSError):
        fs.resolve("/sys/a/x")
    assert fs.read_checked("/etc/cufile.json", 1 << 20)[1].endswith("not a regular file")
    assert fs.read_bytes("/sys/a") is None


# -- not snapshots, damaged snapshots --------------------------------------------------------------


def test_tar_of_only_etc_hostname_is_not_a_snapshot(tmp_path):
    p = tmp_path / "host.tar.gz"
    with tarfile.open(p, "w:gz") as tar:
        add_bytes(tar, "etc/hostname", b"node7\n")
    for cmd in ("topology", "check"):
        rc, out, err, _ = run(cmd, "--from", str(p))
        assert rc == 3 and "is not a gdsdiag snapshot" in err and err.count("\n") == 1, err


def test_truncated_gzip_is_an_error_not_an_interrupt(tmp_path):
    data = open(H200, "rb").read()
    p = tmp_path / "cut.tar.gz"
    p.write_bytes(data[: len(data) // 2])
    rc, out, err, _ = run("topology", "--from", str(p))
    assert rc == 3 and "truncated" in err and "interrupted" not in err, err


def test_gzip_damaged_after_its_first_member_is_an_error(tmp_path):
    """Two concatenated gzip members (as 'cat a.gz b.gz' makes); the second is damaged: gzip's
    CRC check at the end of the stream catches it."""
    raw = gzip.decompress(open(H200, "rb").read())
    half = len(raw) // 2 // 512 * 512
    second = bytearray(gzip.compress(raw[half:]))
    second[len(second) // 2] ^= 0xFF
    p = tmp_path / "bad.tar.gz"
    p.write_bytes(gzip.compress(raw[:half]) + bytes(second))
    for cmd in ("topology", "check"):
        rc, out, err, _ = run(cmd, "--from", str(p))
        assert rc == 3 and "damaged" in err, (cmd, rc, err)


def test_tar_with_garbage_after_a_member_is_damaged(tmp_path):
    raw = bytearray(gzip.decompress(open(H200, "rb").read()))
    with tarfile.open(H200) as t:
        off = t.getmembers()[40].offset
    raw[off : off + 512] = b"\x07" * 512  # the 41st member's header overwritten
    p = tmp_path / "garbage.tar.gz"
    p.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(GdsdiagError, match="damaged|not a readable"):
        open_snapshot(str(p))


def test_not_an_archive_and_directories_and_fifos(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(b"hello")
    os.mkfifo(tmp_path / "fifo")
    for arg, words in (
        (str(tmp_path / "x.tar.gz"), "not a readable tar archive"),
        (str(tmp_path / "fifo"), "is a FIFO"),
        ("/dev/zero", "character device"),
        (str(tmp_path), "is a directory"),
    ):
        rc, out, err, secs = run("topology", "--from", arg, timeout=30)
        assert rc == 3 and words in err and secs < 20, (arg, err)


# -- bombs -----------------------------------------------------------------------------------------


def test_sparse_2gb_member_is_refused_at_once(tmp_path):
    """As reported: a ~220-byte snapshot holding a 2 GB sparse member (GNU tar --sparse)."""
    if not shutil.which("tar"):
        pytest.skip("GNU tar not installed")
    src = tmp_path / "src"
    (src / "sys").mkdir(parents=True)
    with open(src / "sys" / "big", "wb") as f:
        f.truncate(2 << 30)
    (src / "gdsdiag-snapshot.txt").write_bytes(MARKER)
    p = tmp_path / "sparse.tar.gz"
    subprocess.run(["tar", "--sparse", "-czf", str(p), "-C", str(src), "sys", "gdsdiag-snapshot.txt"], check=True)
    assert p.stat().st_size < 4096
    t = time.monotonic()
    rc, err, rss = peak_rss_kib("topology", "--from", str(p))
    assert rc == 3 and "over the 16.0 MiB limit" in err, err
    assert time.monotonic() - t < 20 and rss < 300_000


def test_gzip_bomb_is_stopped_at_the_stream_limit(tmp_path):
    """Well under 1 MB of gzip that unpacks to 512 MiB of tar (members of 8 MiB each)."""
    p = tmp_path / "bomb.tar.gz"
    zeros = gzip.compress(bytes(8 << 20), compresslevel=9)  # one gzip member, reused (concatenation is valid gzip)
    with open(p, "wb") as raw:
        for i in range(64):
            ti = tarfile.TarInfo(f"sys/f{i}")
            ti.size = 8 << 20
            raw.write(gzip.compress(ti.tobuf(format=tarfile.GNU_FORMAT)))
            raw.write(zeros)
    assert p.stat().st_size < 1 << 20
    t = time.monotonic()
    rc, err, rss = peak_rss_kib("topology", "--from", str(p))
    assert rc == 3 and ("unpacks to more than" in err or "of data" in err), err
    assert time.monotonic() - t < 30 and rss < 600_000, (rss, err)


def test_limits_on_members_and_total_bytes(tmp_path):
    def many(tar):
        for i in range(50):
            add_bytes(tar, f"sys/f{i}", b"x" * 1000)

    snap = snapshot_with(tmp_path / "many.tar.gz", many)
    with pytest.raises(GdsdiagError, match="more than 20 members"):
        ArchiveRoot(snap, Limits(members=20))
    with pytest.raises(GdsdiagError, match="more than 10.0 KiB of data"):
        ArchiveRoot(snap, Limits(total_bytes=10 * 1024))
    with pytest.raises(GdsdiagError, match="over the 512 bytes limit"):
        ArchiveRoot(snap, Limits(member_bytes=512))
    assert len(ArchiveRoot(snap).listdir("/sys")) == 50


# -- the real snapshot through the archive root ----------------------------------------------------


def test_h200_snapshot_reads_the_same_as_extracted(tmp_path):
    """Every regular file of the real snapshot reads the same through ArchiveRoot as through
    tarfile's own member data, and every link resolves to a path inside."""
    fs = open_snapshot(H200)
    with tarfile.open(H200) as tar:
        for m in tar.getmembers():
            if m.isreg() and "/" + m.name in fs.files:
                assert fs.read_bytes("/" + m.name) == tar.extractfile(m).read()
    assert fs.problems == []
    assert fs.resolve("/sys/class/net/eth0/device") == "/sys/devices/pci0000:00/0000:00:03.0/virtio2"


def test_hard_link_whose_source_its_own_placement_replaces(tmp_path):
    """Found by benchmarks/fuzz_parsers.py: a hard link 'a/x' naming 'a' (a file that placing
    a/x turns into a directory) raised KeyError; a link to itself likewise."""

    def build(tar):
        add_bytes(tar, "a", b"data")
        add_link(tar, "a/x", "a", tarfile.LNKTYPE)
        add_bytes(tar, "b", b"bee")
        add_link(tar, "b", "b", tarfile.LNKTYPE)

    fs = open_snapshot(snapshot_with(tmp_path / "hl.tar.gz", build))
    assert fs.read_bytes("/a/x") == b"data" and fs.read_bytes("/b") == b"bee"
