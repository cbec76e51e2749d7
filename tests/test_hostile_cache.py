"""Issue 24, item 2: nothing executable or trusted is taken from a place another user can write.
Each test plants one attack on the cache (a symlink in a component, a file or directory owned by
another user, a group/world-writable directory) and shows that it is refused: the I/O loop falls
back to Python with a stated reason, the probe cache reads and prunes nothing of the user's."""

import json
import os
import stat
import subprocess
import sys

import pytest

from gdsdiag import privdir
from gdsdiag.sweep import native
from gdsdiag.trace.probes import bpfcache

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plants files as another user: needs root")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    d = tmp_path / "cache"
    monkeypatch.setenv("GDSDIAG_CACHE_DIR", str(d))
    monkeypatch.delenv("GDSDIAG_PYTHON_LOOP", raising=False)
    native._state.pop("lib", None)
    native._state.pop("why", None)
    yield d
    native._state.pop("lib", None)
    native._state.pop("why", None)


def _so_name():
    import hashlib

    h = hashlib.sha256()
    for p in (native._csrc_file("ioloop.c"), native._csrc_file("ioloop.h")):
        h.update(open(p, "rb").read())
    h.update(os.path.realpath(native._compiler()).encode())
    return f"ioloop-{h.hexdigest()[:16]}.so"


def _planted_library(path, marker):
    """A library whose constructor writes ``marker``: proof that it ran."""
    src = path.parent / "evil.c"
    src.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void pwn(void)"
        f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\nint gd_abi_version(void) {{ return 4; }}\n'
    )
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(path), str(src)], check=True)
    src.unlink()


def test_root_default_is_not_a_users_home(monkeypatch):
    monkeypatch.delenv("GDSDIAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("XDG_CACHE_HOME", "/home/someone/.cache")  # sudo -E keeps these
    assert privdir.location() == privdir.ROOT_CACHE


def test_builds_and_loads_in_a_fresh_private_dir(cache):
    lib, why = native.load()
    assert why is None and lib is not None
    st = os.lstat(cache)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == 0
    st = os.lstat(cache / _so_name())
    assert st.st_uid == 0 and not st.st_mode & 0o022


def test_library_owned_by_another_user_is_not_loaded(cache, tmp_path):
    cache.mkdir(mode=0o700)
    marker = tmp_path / "ran"
    _planted_library(cache / _so_name(), marker)
    os.chown(cache / _so_name(), NOBODY, NOBODY)
    lib, why = native.load()
    assert lib is None and "owned by uid 65534" in why
    assert not marker.exists()


def test_library_symlinked_is_not_loaded(cache, tmp_path):
    cache.mkdir(mode=0o700)
    marker = tmp_path / "ran"
    _planted_library(tmp_path / "elsewhere.so", marker)
    os.symlink(tmp_path / "elsewhere.so", cache / _so_name())
    lib, why = native.load()
    assert lib is None and "symlink" in why
    assert not marker.exists()


def test_cache_dir_writable_by_others_is_not_used(cache, tmp_path):
    cache.mkdir()
    marker = tmp_path / "ran"
    _planted_library(cache / _so_name(), marker)
    os.chmod(cache, 0o777)  # anyone could have put the library there
    lib, why = native.load()
    assert lib is None and "writable by others" in why
    assert not marker.exists()


def test_cache_dir_owned_by_another_user_is_not_used(cache, tmp_path):
    cache.mkdir(mode=0o700)
    marker = tmp_path / "ran"
    _planted_library(cache / _so_name(), marker)
    os.chown(cache / _so_name(), 0, 0)
    os.chown(cache, NOBODY, NOBODY)  # nobody made the directory (a shared XDG_CACHE_HOME)
    lib, why = native.load()
    assert lib is None and "owned by uid 65534" in why
    assert not marker.exists()


def test_symlink_in_an_ancestor_is_refused(tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    monkeypatch.setenv("GDSDIAG_CACHE_DIR", str(tmp_path / "link" / "gdsdiag"))
    with pytest.raises(privdir.Refused, match="symlink"):
        os.close(privdir.open_dir())
    assert not (tmp_path / "real" / "gdsdiag").exists()


def test_ancestor_writable_by_others_is_refused(tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # not sticky: anyone can rename our directory away and plant theirs
    monkeypatch.setenv("GDSDIAG_CACHE_DIR", str(shared / "gdsdiag"))
    with pytest.raises(privdir.Refused, match="writable by others"):
        os.close(privdir.open_dir())


def test_hard_link_is_refused(cache, tmp_path):
    cache.mkdir(mode=0o700)
    (tmp_path / "f").write_text("x")
    os.link(tmp_path / "f", cache / "probes-x.json")
    d = privdir.open_dir()
    try:
        with pytest.raises(privdir.Refused, match="links"):
            privdir.open_file(d, "probes-x.json", "x")
    finally:
        os.close(d)


def test_bpf_cache_symlinked_dir_is_neither_written_nor_pruned(cache, tmp_path):
    """The planted ~/.cache/gdsdiag/bpf -> DIR: root wrote into DIR and deleted the user's files."""
    cache.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir()
    for i in range(20):
        (victim / f"probes-{i}").write_text("the user's file")
    os.symlink(victim, cache / "bpf")
    assert bpfcache.load("k") is None
    with pytest.raises(privdir.Refused):
        bpfcache._open_dir(create=True)
    assert len(os.listdir(victim)) == 20


def test_bpf_cache_refuses_other_owner_and_prunes_only_its_own(cache):
    d = cache / "bpf"
    d.mkdir(parents=True, mode=0o700)
    os.chmod(cache, 0o700)
    doc = {"format": bpfcache.FORMAT, "tables": [], "functions": {}}
    (d / "probes-k.json").write_text(json.dumps(doc))
    assert bpfcache.load("k") == doc
    os.chown(d / "probes-k.json", NOBODY, NOBODY)
    assert bpfcache.load("k") is None
    for i in range(bpfcache.KEEP + 5):
        (d / f"probes-old{i:02}.json").write_text("{}")
        os.utime(d / f"probes-old{i:02}.json", (1000 + i, 1000 + i))
    os.symlink("/etc/passwd", d / "probes-aaa-link")
    dfd = bpfcache._open_dir(create=False)
    try:
        bpfcache._prune(dfd)
    finally:
        os.close(dfd)
    left = os.listdir(d)
    assert "probes-k.json" in left  # another owner's file: not ours to delete either
    assert "probes-aaa-link" in left and os.path.exists("/etc/passwd")
    assert sum(n.startswith("probes-old") for n in left) == bpfcache.KEEP


def _readable_copy(top: str) -> str:
    """The package and its C loop copied where nobody can read them (a checkout under /root, as a
    fresh box's clone often is, is not: the loader then says its source "is not installed")."""
    import shutil

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dst = os.path.join(top, "src")
    for name in ("gdsdiag", "csrc"):
        shutil.copytree(os.path.join(repo, name), os.path.join(dst, name), ignore=shutil.ignore_patterns("__pycache__"))
    for d, _, files in os.walk(dst):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return dst


def test_unprivileged_user_gets_its_own_cache_or_a_stated_fallback():
    """As a real unprivileged user (a child that setuid()s to nobody): a cache directory root
    made is refused, and the sweep's loader says why instead of dying on PermissionError."""
    import shutil
    import tempfile

    top = tempfile.mkdtemp(dir="/tmp")  # pytest's tmp_path is under a 0700 directory of root's
    os.chmod(top, 0o755)
    theirs = os.path.join(top, "rootmade")
    os.mkdir(theirs, 0o755)
    mine = os.path.join(top, "nobodys")
    os.mkdir(mine, 0o755)
    os.chown(mine, NOBODY, NOBODY)
    pkg = _readable_copy(top)
    code = (
        # the interpreter lives under /root here: import what the loader needs, then drop to nobody
        "import os, sys, cffi, hashlib; from gdsdiag import privdir; from gdsdiag.sweep import native; native.ffi();"
        "os.setgid(65534); os.setuid(65534);"
        f"os.environ['GDSDIAG_CACHE_DIR'] = {str(theirs)!r};"
        "lib, why = native.load();"
        "print(lib is None, why)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd="/",
        env=dict(os.environ, PYTHONPATH=pkg),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("True ") and "owned by uid 0" in r.stdout
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code.replace(theirs, mine + "/gdsdiag").replace("print(lib is None, why)", "print(lib is not None, why)"),
        ],
        capture_output=True,
        text=True,
        cwd="/",
        env=dict(os.environ, PYTHONPATH=pkg),
    )
    shutil.rmtree(top)
    assert r.stdout.startswith("True None"), r.stdout + r.stderr  # its own cache: built and loaded


# -- libcufile's log (cufile.log): the same rules -------------------------------------------------


def test_cufile_log_goes_to_the_checked_private_dir_0600(tmp_path, monkeypatch):
    from gdsdiag.cufile import _lib

    os.chmod(tmp_path, 0o755)
    monkeypatch.delenv("GDSDIAG_LOG_DIR", raising=False)
    monkeypatch.setenv("GDSDIAG_CACHE_DIR", str(tmp_path / "c"))
    path = _lib.default_log_path()
    assert path == str(tmp_path / "c" / "cufile.log") and _lib.LOG_REFUSED is None
    assert stat.S_IMODE(os.stat(tmp_path / "c").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_cufile_log_as_root_is_never_in_a_users_home(tmp_path, monkeypatch):
    """Under `sudo -E` HOME and XDG_CACHE_HOME are the user's: root's log went there (issue 24)."""
    from gdsdiag.cufile import _lib

    os.chmod(tmp_path, 0o755)
    for k in ("GDSDIAG_LOG_DIR", "GDSDIAG_CACHE_DIR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.setattr(privdir, "ROOT_CACHE", str(tmp_path / "var-cache-gdsdiag"))
    assert _lib.default_log_path() == str(tmp_path / "var-cache-gdsdiag" / "cufile.log")
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize(
    "attack", ["symlinked-dir", "symlink-in-ancestor", "other-owner", "world-writable", "log-symlink"]
)
def test_cufile_log_in_a_place_another_user_controls_is_refused(tmp_path, monkeypatch, attack):
    """The log directory of libcufile (which root writes) follows privdir's rules: a symlink in any
    component, a directory of another user or one others can write, a cufile.log that is a link:
    the log goes to /dev/null, the reason is kept (gdsdiag cufile shows it), nothing is written
    where the link points."""
    from gdsdiag.cufile import _lib

    os.chmod(tmp_path, 0o755)
    victim = tmp_path / "victim"
    victim.mkdir()
    d = tmp_path / "logs"
    if attack == "symlinked-dir":
        d.symlink_to(victim)
    elif attack == "symlink-in-ancestor":
        (tmp_path / "up").symlink_to(victim)
        d = tmp_path / "up" / "logs"
    elif attack == "other-owner":
        d.mkdir(mode=0o700)
        os.chown(d, NOBODY, NOBODY)
    elif attack == "world-writable":
        d.mkdir()
        os.chmod(d, 0o777)
    else:
        d.mkdir(mode=0o700)
        (d / "cufile.log").symlink_to(victim / "shadow")
    monkeypatch.setenv("GDSDIAG_LOG_DIR", str(d))
    assert _lib.default_log_path() == os.devnull
    assert _lib.LOG_REFUSED and str(tmp_path) in _lib.LOG_REFUSED
    assert os.listdir(victim) == []


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write_and_a_live_ones_kept(tmp_path):
    """privdir.replace_into writes '.NAME.<12 hex>.tmp' and renames it: a SIGKILL between the two
    left it in the cache for good. The next write removes such files of ours whose lock is free
    (a killed writer's); one a live writer holds stays."""
    import fcntl

    os.chmod(tmp_path, 0o755)
    dfd = privdir.open_dir(base=str(tmp_path / "c"))
    try:
        dead = ".probes-k.json.0123456789ab.tmp"
        live = ".probes-k.json.ba9876543210.tmp"
        os.close(os.open(dead, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=dfd))
        held = os.open(live, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=dfd)
        fcntl.flock(held, fcntl.LOCK_EX)
        other = tmp_path / "c" / "notes.txt"  # not of that form: never touched
        other.write_text("x")
        privdir.replace_into(dfd, "probes-k.json", b"{}")
        names = sorted(os.listdir(dfd))
        assert dead not in names and live in names and "notes.txt" in names and "probes-k.json" in names
        os.close(held)
    finally:
        os.close(dfd)
