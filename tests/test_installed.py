"""What users install is what is tested: the wheel holds every module and data file of the source
tree, the suite imports the installed package (under tests/run.sh), and every command of the
installed console script answers --help and one real invocation."""

import json
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import FIXTURES, GDSDIAG, INSTALLED, REPO

H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
# Source directories and where setup.py installs them inside the wheel.
SOURCE_TO_WHEEL = {"gdsdiag": "gdsdiag", "csrc": "gdsdiag/_csrc", "probes": "gdsdiag/_probes"}
NOT_SHIPPED = (".pyc", ".pyo", "~")


def _source_files() -> set[str]:
    out = set()
    for src, dest in SOURCE_TO_WHEEL.items():
        base = os.path.join(REPO, src)
        for d, dirs, files in os.walk(base):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for f in files:
                if not f.endswith(NOT_SHIPPED):
                    out.add(os.path.join(dest, os.path.relpath(os.path.join(d, f), base)).replace(os.sep, "/"))
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    w = os.environ.get("GDSDIAG_WHEEL")
    if w:
        return w
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), REPO],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {r.stderr.strip()[-200:]}")
    (name,) = [f for f in os.listdir(out) if f.endswith(".whl")]
    return str(out / name)


def test_wheel_holds_every_module_and_data_file(wheel):
    with zipfile.ZipFile(wheel) as z:
        shipped = {n for n in z.namelist() if not n.split("/")[0].endswith((".dist-info", ".data"))}
    missing = sorted(_source_files() - shipped)
    assert not missing, f"in the source tree but not in the wheel: {missing}"
    assert "gdsdiag/_probes/cufile_trace.c" in shipped and "gdsdiag/_csrc/cufile_cdef.h" in shipped
    # every package directory is importable (an __init__.py), or setuptools leaves it out of installs
    for n in shipped:
        if n.endswith(".py") and n.startswith("gdsdiag/"):
            pkg = n.rsplit("/", 1)[0]
            assert f"{pkg}/__init__.py" in shipped, f"{pkg} has no __init__.py"


def test_wheel_declares_an_entry_point_and_python_requirement(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        ep = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "gdsdiag = gdsdiag.__main__:main" in ep
    assert "Requires-Python: >=3.10" in meta


@pytest.mark.skipif(not INSTALLED, reason="runs under tests/run.sh, against the installed wheel")
def test_suite_imports_the_installed_package_not_the_checkout():
    import gdsdiag

    here = os.path.realpath(gdsdiag.__file__)
    assert not here.startswith(os.path.realpath(REPO) + os.sep), f"gdsdiag imported from the checkout: {here}"
    assert GDSDIAG == [os.path.join(os.path.dirname(sys.executable), "gdsdiag")]
    from gdsdiag.cufile._lib import cdef_text
    from gdsdiag.trace.probes.bpf import probe_source

    assert "cuFileDriverOpen" in cdef_text() and "TRACEPOINT_PROBE" in probe_source("cufile_trace.c")


@pytest.mark.skipif(not INSTALLED, reason="runs under tests/run.sh, against the installed wheel")
def test_run_sh_reports_every_skip_with_its_reason(request):
    """tests/run.sh runs pytest with -rs (both of its processes share one command line), so a run
    on a machine without a GPU, root or bcc lists what it did not test and why."""
    assert "s" in (request.config.option.reportchars or ""), request.config.option.reportchars


def _commands() -> list[str]:
    import click

    from gdsdiag.cli import cli

    return cli.list_commands(click.Context(cli))


@pytest.mark.parametrize("command", _commands())
def test_every_command_answers_help(command):
    r = subprocess.run([*GDSDIAG, command, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout and command in r.stdout


def test_version_and_top_level_help():
    r = subprocess.run([*GDSDIAG, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("gdsdiag, version ")
    r = subprocess.run([*GDSDIAG, "--help"], capture_output=True, text=True, timeout=60)
    for command in _commands():
        assert command in r.stdout


def test_installed_check_runs_on_a_snapshot():
    """The command a node validation starts with (it failed after `pip install .` when
    gdsdiag/check had no __init__.py)."""
    r = subprocess.run([*GDSDIAG, "check", "--from", H200, "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode in (1, 2), r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "gdsdiag.check/1" and doc["checks"]


def test_installed_cufile_finds_the_wheel_library():
    r = subprocess.run([*GDSDIAG, "cufile", "--no-open", "--json"], capture_output=True, text=True, timeout=120)
    if r.returncode == 3 and "libcufile" in r.stderr:
        pytest.skip(f"no libcufile here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"]
