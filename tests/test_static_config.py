"""GDS 1.20's static GPU hardware configuration (gdsdiag/static_config.py): `gdsdiag cufile` and
`check` report the file cufile.json names by presence, path and size — NVIDIA publishes no format
gdsdiag can cite, so the contents are never read as facts. The file under test holds bytes of a
real file of this repository (its contents do not matter: that is the point)."""

import json
import os
import shutil
import subprocess

import check_fixtures as cf
import pytest
from conftest import GDSDIAG

from gdsdiag import cufile_json, static_config
from gdsdiag.platform.fsroot import FsRoot

HERE = os.path.dirname(os.path.abspath(__file__))
ANY_REAL_FILE = os.path.join(
    HERE, "fixtures", "libcufile-strings", "libcufile-1.20.0.107-cuobject-and-static-config.txt"
)


@pytest.fixture
def h200(tmp_path):
    return cf.unpack_h200(str(tmp_path / "h200"))


def _read(root):
    fs = FsRoot(root)
    return static_config.read(fs, cufile_json.load(fs, {}))


def test_states_from_the_cufile_json_in_effect(h200):
    got = _read(h200)  # the GPU machine's cufile.json says nothing of it
    assert (got.enabled, got.path, got.present) == (None, None, None)
    assert got.summary().startswith("off (miscellaneous.enable_static_config unset: /etc/cufile.json)")
    cf.set_cufile(h200, '{"miscellaneous": {"enable_static_config": true}}')
    assert "static_config_filepath is unset: libcufile falls back to probing" in _read(h200).summary()
    cf.set_cufile(
        h200,
        json.dumps({"miscellaneous": {"enable_static_config": True, "static_config_filepath": "/etc/gds-hw.json"}}),
    )
    got = _read(h200)
    assert got.present is False and "/etc/gds-hw.json does not exist" in got.summary()
    shutil.copy(ANY_REAL_FILE, os.path.join(h200, "etc", "gds-hw.json"))
    got = _read(h200)
    size = os.path.getsize(ANY_REAL_FILE)
    assert got.present is True and got.size == size
    assert got.summary().startswith(
        f"on: /etc/gds-hw.json ({size} bytes) caches each GPU's BAR size and P2PDMA support"
    )
    assert got.to_json()["format"] == "format not documented by NVIDIA: its contents are not read"
    # a file that is there but not enabled is named as unused
    cf.set_cufile(
        h200,
        json.dumps({"miscellaneous": {"enable_static_config": False, "static_config_filepath": "/etc/gds-hw.json"}}),
    )
    assert f"/etc/gds-hw.json is there ({size} bytes) but unused" in _read(h200).summary()


def test_check_says_the_same_as_the_reader(h200):
    from gdsdiag.check.checks import check_cufile_json
    from gdsdiag.check.context import CheckContext

    cf.set_cufile(
        h200,
        json.dumps({"miscellaneous": {"enable_static_config": True, "static_config_filepath": "/etc/gds-hw.json"}}),
    )
    shutil.copy(ANY_REAL_FILE, os.path.join(h200, "etc", "gds-hw.json"))
    (r,) = [x for x in check_cufile_json(CheckContext(FsRoot(h200), env={})) if x.id == "cufile.static_config"]
    assert r.summary == _read(h200).summary() and "regenerate" in r.summary


def _cufile_cmd(env, *args):
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([*GDSDIAG, "cufile", "--no-open", *args], capture_output=True, text=True, env=e, timeout=120)


def test_cufile_command_reports_it(tmp_path):
    pytest.importorskip("cffi")
    from gdsdiag.cufile._lib import candidates

    if not candidates():
        pytest.skip("no libcufile found: pip install '.[test]' installs the nvidia-cufile wheel")
    hw = tmp_path / "hw.json"
    shutil.copy(ANY_REAL_FILE, hw)
    cfg = tmp_path / "cufile.json"
    cfg.write_text(json.dumps({"miscellaneous": {"enable_static_config": True, "static_config_filepath": str(hw)}}))
    env = {"CUFILE_ENV_PATH_JSON": str(cfg), "CUFILE_LOGFILE_PATH": str(tmp_path / "cufile.log")}
    doc = json.loads(_cufile_cmd(env, "--json").stdout)
    sc = doc["static_config"]
    assert (sc["cufile_json"], sc["enabled"], sc["path"], sc["present"]) == (str(cfg), True, str(hw), True)
    text = _cufile_cmd(env).stdout
    assert f"static GPU config (GDS 1.20): on: {hw} (" in text
    # a cufile.json that says nothing of it: no line in the text, the state in --json
    cfg.write_text("{}")
    assert "static GPU config" not in _cufile_cmd(env).stdout
    assert json.loads(_cufile_cmd(env, "--json").stdout)["static_config"]["enabled"] is None
