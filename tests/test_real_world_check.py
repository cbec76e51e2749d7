"""Issue 12, `gdsdiag check` side. The node is the GPU machine's real snapshot
(tests/fixtures/snapshots/h200-vm-2026-11-29.tar.gz) with the nvidia-fs files of check_fixtures
(stats = the real capture corpus/nvfs-stats/stelline-gds1.14-nvfs2.25.7-after-gdsio-write.txt, which
carries 'NVFS Driver(version: 2.25.7)' and 'IO stats: Disabled'). Each test failed before its fix."""

import json
import os
import re
import subprocess

import check_fixtures as cf
import pytest
from conftest import GDSDIAG, corpus

from gdsdiag.check.context import CheckContext
from gdsdiag.check.runner import run
from gdsdiag.documents.check import document
from gdsdiag.errors import GdsdiagError
from gdsdiag.platform.fsroot import FsRoot

REPR = re.compile(r"\bNone\b|\{'|\['|\('|': ")


@pytest.fixture
def nvfs_node(tmp_path):
    root = cf.unpack_h200(str(tmp_path / "h200"))
    cf.add_nvidia_fs(root)
    cf.add_device_nodes(root)
    return root


def _ids(root, gdscheck=None):
    rep = run(CheckContext(FsRoot(root), env={}), [], gdscheck)
    return rep, {r.id: r for r in rep.results if r.path is None}


def test_nvfs_version_from_stats_when_version_files_are_missing(nvfs_node):
    # a container without /sys/module and a capture without /proc/driver/nvidia-fs/version
    os.unlink(os.path.join(nvfs_node, "proc/driver/nvidia-fs/version"))
    os.unlink(os.path.join(nvfs_node, "sys/module/nvidia_fs/version"))
    _, ids = _ids(nvfs_node)
    r = ids["nvfs.loaded"]
    assert r.summary == "loaded, version 2.25.7"
    assert any(e.value == "NVFS Driver(version: 2.25.7)" for e in r.evidence)


def test_io_stats_follow_the_stats_header_when_the_parameter_file_is_absent(nvfs_node):
    os.unlink(os.path.join(nvfs_node, "sys/module/nvidia_fs/parameters/rw_stats_enabled"))
    _, ids = _ids(nvfs_node)
    r = ids["nvfs.stats"]
    # the verdict names what it was decided from, and it is the same switch the header reports
    assert r.summary.startswith("read/write counters disabled (/proc/driver/nvidia-fs/stats: IO stats Disabled)")
    ev = {e.source: e.value for e in r.evidence}
    assert ev["/sys/module/nvidia_fs/parameters/rw_stats_enabled"] == "(absent)"
    assert "IO stats Disabled" in ev["/proc/driver/nvidia-fs/stats"]


def test_json_evidence_holds_no_python_repr(nvfs_node):
    os.unlink(os.path.join(nvfs_node, "sys/module/nvidia_fs/parameters/peer_stats_enabled"))
    rep, _ = _ids(nvfs_node)
    doc = document(rep)
    values = [(c["id"], e["value"]) for c in doc["checks"] for e in c["evidence"]]
    assert values
    bad = [(i, v) for i, v in values if REPR.search(v)]
    assert bad == []
    json.dumps(doc)


def test_gdscheck_option_rejects_text_that_is_not_gdscheck(nvfs_node):
    # a real nvidia-smi topo -m capture handed to --gdscheck by mistake
    text = open(corpus("nvidia-smi-topo", "puget-wrx90-2xrtx6000ada-phb-cx7.txt")).read()
    with pytest.raises(GdsdiagError) as e:
        _ids(nvfs_node, text)
    assert "not 'gdscheck -p' output" in e.value.line()
    # every real gdscheck capture is still accepted
    for name in os.listdir(corpus("gdscheck")):
        rep, _ = _ids(nvfs_node, open(corpus("gdscheck", name)).read())
        assert rep.gdscheck, name


def _cli(*args):
    return subprocess.run([*GDSDIAG, *args], capture_output=True, text=True)


def test_cli_path_that_does_not_exist_is_one_clear_line(tmp_path):
    missing = str(tmp_path / "nonexistent")
    r = _cli("check", "--path", missing)
    assert r.returncode == 4  # a usage error (issue 23)
    assert r.stderr.strip() == (
        f"gdsdiag: error: --path {missing} does not exist — pass an existing directory on the storage to test"
    )
    assert "None" not in r.stdout + r.stderr


def test_cli_gdscheck_on_other_text_is_an_error():
    r = _cli(
        "check", "--from", cf.H200, "--gdscheck", corpus("nvidia-smi-topo", "puget-wrx90-2xrtx6000ada-phb-cx7.txt")
    )
    assert r.returncode == 3 and "0 of 0" not in r.stdout and len(r.stderr.strip().splitlines()) == 1
