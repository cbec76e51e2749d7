"""Issue 42, item 5: files and programs the environment names, kept by ``sudo -E``, are used by a
root gdsdiag only when root owns them and no one else can write them or a directory above them
(gdsdiag/envtrust.py): GDSDIAG_LIBCUFILE and CUDA_HOME (loaded), CC and GDSDIAG_FIO (run), and
the files snapshot copies out (CUFILE_ENV_PATH_JSON, CUFILE_LOGFILE_PATH, which must also be
readable by every user). ``--allow-user-files`` uses them anyway and says so. The attacker here
is uid 65534 (nobody), the files real, the library a real one whose constructor leaves a mark."""

import os
import shutil
import subprocess
import sys

import pytest

from gdsdiag import envtrust
from gdsdiag.errors import GdsdiagError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the rule is for a root gdsdiag (chown needs root)")

NOBODY = 65534
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _no_allow(monkeypatch):
    monkeypatch.delenv(envtrust.ALLOW_ENV, raising=False)


@pytest.fixture
def rootdir(tmp_path):
    """A directory chain root owns and no one else can write (pytest's tmp_path is 0700 root)."""
    d = tmp_path / "r"
    d.mkdir(mode=0o755)
    return d


def _owned_by_nobody(path, text="x"):
    path.write_text(text)
    os.chown(path, NOBODY, NOBODY)
    return path


def _marker_library(tmp_path, marker):
    """A real shared library whose constructor writes ``marker``: what a planted libcufile does."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    src = tmp_path / "evil.c"
    src.write_text(
        "#include <stdio.h>\n"
        f'__attribute__((constructor)) static void planted(void) {{ FILE *f = fopen("{marker}", "w"); '
        'if (f) { fputs("ran as root", f); fclose(f); } }\n'
        "typedef struct { int err; int cu_err; } CUfileError_t;\n"
        "CUfileError_t cuFileGetVersion(int *v) { CUfileError_t r = {0, 0}; *v = 1150; return r; }\n"
    )
    lib = tmp_path / "user" / "libcufile.so.0"
    lib.parent.mkdir()
    os.chown(lib.parent, NOBODY, NOBODY)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    os.chown(lib, NOBODY, NOBODY)
    return lib


def test_a_file_another_user_owns_is_refused_with_the_variable_the_owner_and_the_fix(tmp_path):
    f = _owned_by_nobody(tmp_path / "fio")
    with pytest.raises(GdsdiagError) as e:
        envtrust.trusted("GDSDIAG_FIO", str(f), "run")
    line = e.value.line()
    assert "GDSDIAG_FIO=" in line and "uid 65534" in line, line
    assert "--allow-user-files" in line and "unset GDSDIAG_FIO" in line, line
    assert "\n" not in line


def test_a_root_file_in_a_directory_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # not sticky: anyone can swap the name
    f = shared / "cc"
    f.write_text("#!/bin/sh\n")
    with pytest.raises(GdsdiagError, match="writable by others"):
        envtrust.trusted("CC", str(f), "run")


def test_a_root_file_in_a_root_chain_is_used_as_named(rootdir, tmp_path):
    """(as named: a ccache link called gcc must run under its own name)"""
    f = rootdir / "fio"
    f.write_text("#!/bin/sh\n")
    link = tmp_path / "link"
    os.symlink(f, link)
    assert envtrust.trusted("GDSDIAG_FIO", str(link), "run") == str(link)


def test_a_link_others_could_retarget_is_used_by_its_checked_real_path(rootdir, tmp_path):
    f = rootdir / "fio"
    f.write_text("#!/bin/sh\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # another user could replace the link after the check
    os.symlink(f, shared / "fio")
    assert envtrust.trusted("GDSDIAG_FIO", str(shared / "fio"), "run") == os.path.realpath(f)


def test_a_root_owned_link_to_a_user_file_is_judged_by_its_target(rootdir, tmp_path):
    target = _owned_by_nobody(tmp_path / "theirs")
    link = rootdir / "libcufile.so.0"
    os.symlink(target, link)
    with pytest.raises(GdsdiagError, match="uid 65534"):
        envtrust.trusted("GDSDIAG_LIBCUFILE", str(link), "load")


def test_a_planted_libcufile_is_never_loaded(tmp_path, monkeypatch):
    from gdsdiag.cufile import _lib

    marker = tmp_path / "ran"
    lib = _marker_library(tmp_path, marker)
    monkeypatch.setenv("GDSDIAG_LIBCUFILE", str(lib))
    monkeypatch.setenv("GDSDIAG_LOG_DIR", str(tmp_path / "log"))
    monkeypatch.setattr(_lib, "_loaded", None)
    with pytest.raises(GdsdiagError, match="GDSDIAG_LIBCUFILE=.*uid 65534"):
        _lib.load(None)
    assert not marker.exists()


def test_a_cuda_home_another_user_owns_is_refused(tmp_path, monkeypatch):
    from gdsdiag.cufile import _lib

    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    os.chown(home, NOBODY, NOBODY)
    lib = home / "lib64" / "libcufile.so.0"
    lib.write_text("")
    monkeypatch.setenv("CUDA_HOME", str(home))
    with pytest.raises(GdsdiagError, match="CUDA_HOME=.*uid 65534"):
        _lib._environment_checked(f"CUDA toolkit ({home})", str(lib), None)


def test_allow_user_files_uses_it_and_says_so(tmp_path):
    """Through the command line, as an operator would: the flag, then the library loaded."""
    marker = tmp_path / "ran"
    lib = _marker_library(tmp_path, marker)
    code = (
        "import sys; from gdsdiag.cli import cli; from gdsdiag.cufile import _lib\n"
        "sys.argv = ['gdsdiag', '--allow-user-files', 'kv', '--help']\n"
        "try:\n    cli()\nexcept SystemExit:\n    pass\n"
        "_lib.load(None); print('loaded')\n"
    )
    env = dict(os.environ, GDSDIAG_LIBCUFILE=str(lib), GDSDIAG_LOG_DIR=str(tmp_path / "log"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert r.stdout.strip().endswith("loaded"), r.stderr
    assert "(--allow-user-files)" in r.stderr and "GDSDIAG_LIBCUFILE=" in r.stderr
    assert marker.exists()


def test_a_compiler_another_user_owns_never_runs(tmp_path, monkeypatch):
    from gdsdiag.sweep import native

    marker = tmp_path / "ran"
    cc = _owned_by_nobody(tmp_path / "cc", f'#!/bin/sh\ntouch {marker}\nexec cc "$@"\n')
    os.chmod(cc, 0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("GDSDIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GDSDIAG_PYTHON_LOOP", raising=False)
    monkeypatch.setattr(native, "_state", {})
    lib, why = native.load()
    assert lib is None and "CC=" in why and "uid 65534" in why and "--allow-user-files" in why, why
    assert not marker.exists()


def test_a_fio_another_user_owns_never_runs(tmp_path, monkeypatch):
    from gdsdiag.sweep import fio

    fake = _owned_by_nobody(tmp_path / "fio", "#!/bin/sh\n")
    os.chmod(fake, 0o755)
    monkeypatch.setenv("GDSDIAG_FIO", str(fake))
    with pytest.raises(GdsdiagError, match="GDSDIAG_FIO=.*uid 65534"):
        fio.check_available(["host"])


@pytest.mark.parametrize("mode, owner, refused", [(0o600, 0, "readable only"), (0o644, NOBODY, "uid 65534")])
def test_snapshot_never_copies_a_secret_or_a_user_file(tmp_path, mode, owner, refused):
    from gdsdiag import bundle

    f = tmp_path / "cufile.json"
    f.write_text('{"secret": 1}')
    os.chmod(f, mode)
    os.chown(f, owner, owner)
    with pytest.raises(GdsdiagError, match=refused):
        bundle.env_file("CUFILE_ENV_PATH_JSON", str(f), 1 << 20, whole=True)


def test_snapshot_copies_a_root_file_every_user_may_read(rootdir):
    from gdsdiag import bundle

    f = rootdir / "cufile.log"
    f.write_text("line 1\nline 2\n")
    os.chmod(f, 0o644)
    assert bundle.env_file("CUFILE_LOGFILE_PATH", str(f), 7, whole=False) == (b"line 2\n", None)


def test_snapshot_of_a_node_whose_environment_names_a_secret_ends_with_one_line(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret\n")
    os.chmod(secret, 0o600)
    out = tmp_path / "node.tar.gz"
    env = dict(os.environ, CUFILE_ENV_PATH_JSON=str(secret))
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "snapshot", "-o", str(out), "--redact"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert r.returncode == 3, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "CUFILE_ENV_PATH_JSON=" in last and "readable only" in last, r.stderr
    assert not out.exists()
