"""gdsdiag diff on the GPU machine's real snapshots (one-GPU h200 committed in tests/fixtures,
two-GPU h200x2 in the shared research captures where present) and on variants of the unpacked
h200 tree with one real-format file changed (tests/check_fixtures.py builds them)."""

import json
import os
import subprocess

import check_fixtures as cf
import pytest
from conftest import GDSDIAG

from gdsdiag.diff import diff
from gdsdiag.errors import GdsdiagError

HERE = os.path.dirname(os.path.abspath(__file__))
H200 = cf.H200
H200X2 = "/work/shared/research/captures/h200x2-vm-snapshot-2026-11-30.tar.gz"


def _run(*args):
    return subprocess.run([*GDSDIAG, "diff", *args], capture_output=True, text=True, cwd=os.path.dirname(HERE))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return cf.unpack_h200(str(tmp_path_factory.mktemp("h200")))


def _variant(tree, tmp_path, name):
    return cf.copy_tree(tree, str(tmp_path / name))


def _keys(res, section=None):
    return {x.key for x in res.differences if section is None or x.section == section}


def test_same_snapshot_twice_and_snapshot_vs_its_unpacked_tree_are_the_same(tree):
    assert diff(H200, H200).same
    # volatile fields only (source, the temporary unpack directory in evidence paths) differ here
    res = diff(H200, tree)
    assert res.same, [x.to_json() for x in res.differences]
    r = _run("--json", H200, tree)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "gdsdiag.diff/1" and doc["same"] and doc["differences"] == [] and doc["exit_code"] == 0
    assert doc["a"]["form"] == "snapshot" and doc["b"]["form"] == "root"


@pytest.mark.skipif(not os.path.exists(H200X2), reason="the two-GPU snapshot lives in /work/shared/research/captures")
def test_one_gpu_node_vs_two_gpu_node():
    res = diff(H200, H200X2)
    assert not res.same
    gpu1 = next(x for x in res.differences if x.key == "devices.0000:00:07.0")
    assert gpu1.a == "(absent)" and gpu1.b.startswith("gpu GPU1 10de:")
    assert "pairs.0000:00:06.0~0000:00:07.0" in _keys(res, "pairs")
    udev = next(x for x in res.differences if x.key == "platform.udev.status")
    assert (udev.a, udev.b) == ("PASS", "FAIL")  # the 2-GPU VM had no /run/udev
    r = _run(H200, H200X2)
    assert r.returncode == 1 and "devices.0000:00:07.0: (absent) -> gpu GPU1" in r.stdout


def test_nvidia_fs_loaded_on_one_node_changes_verdict_and_checks(tree, tmp_path):
    b = _variant(tree, tmp_path, "nvfs")
    cf.add_nvidia_fs(b)
    res = diff(tree, b)
    checks = {x.key: x for x in res.differences if x.section == "checks"}
    assert checks["nvfs.loaded.status"].a == "FAIL" and checks["nvfs.loaded.status"].b != "FAIL"
    assert "2.25" in str(checks["nvfs.loaded.summary"].b)


def test_link_downtrained_on_one_node(tree, tmp_path):
    b = _variant(tree, tmp_path, "link")
    # the kernel's format, as in the real file ("32.0 GT/s PCIe"), at Gen4 speed, and the LnkSta
    # register that file prints
    cf.set_link(b, "0000:00:06.0", speed_gts=16.0)
    res = diff(tree, b)
    x = next(x for x in res.differences if x.key == "devices.0000:00:06.0.link.speed_gts")
    assert (x.a, x.b) == (32.0, 16.0)


def test_iommu_translating_on_one_node(tree, tmp_path):
    b = _variant(tree, tmp_path, "iommu")
    cf.set_iommu_translating(b)
    res = diff(tree, b)
    assert any(k.startswith("iommu.") for k in _keys(res, "topology")), [x.to_json() for x in res.differences]
    assert "devices.0000:00:06.0.iommu_group" in _keys(res, "topology")


def test_cufile_json_key_by_key(tree, tmp_path):
    b = _variant(tree, tmp_path, "cufile")
    text = open(os.path.join(tree, "etc/cufile.json")).read()
    assert '"allow_compat_mode": true' in text
    cf.set_cufile(b, text.replace('"allow_compat_mode": true', '"allow_compat_mode": false'))
    res = diff(tree, b)
    cj = [x for x in res.differences if x.section == "cufile.json"]
    assert [(x.key, x.a, x.b) for x in cj] == [("properties.allow_compat_mode", True, False)]


def test_bad_inputs_give_one_line(tmp_path):
    r = _run(str(tmp_path / "nope.tar.gz"), H200)  # names nothing: a usage error (issue 23)
    assert r.returncode == 4 and "not found" in r.stderr and r.stderr.count("\n") == 1
    junk = tmp_path / "junk.tar.gz"
    junk.write_text("not a tar")
    r = _run(str(junk), H200)
    assert r.returncode == 3 and "not a readable tar archive" in r.stderr
    with pytest.raises(GdsdiagError):
        diff(str(tmp_path / "nope"), H200)


def test_snapshot_on_stdin(tree):
    r = subprocess.run(
        [*GDSDIAG, "diff", "--json", tree, "-"],
        input=open(H200, "rb").read(),
        capture_output=True,
        cwd=os.path.dirname(HERE),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["same"] and doc["b"]["input"] == "-" and doc["b"]["form"] == "snapshot"
    r = subprocess.run([*GDSDIAG, "diff", tree, "-"], input=b"", capture_output=True, cwd=os.path.dirname(HERE))
    assert r.returncode == 3 and b"nothing on stdin" in r.stderr


def test_a_side_without_cufile_json_prints_no_empty_key():
    """Issue 46: '  : (absent) -> {}' (the empty document of the side without cufile.json)."""
    from gdsdiag.diff import _flat

    assert _flat({}, "", {}) == {} and _flat(None, "", {}) == {}
    assert _flat({"a": {}}, "", {}) == {"a": {}} and _flat({"a": {"b": 1}}, "", {}) == {"a.b": 1}
