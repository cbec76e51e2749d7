"""cuobj.json and the cuFile/cuObject shared runtime (gdsdiag/check/cuobj.py) against the rules
NVIDIA's GDS 1.20 release notes state (quoted in gdsdiag/cuobj_json.py and docs/checks.md). The
files are written in the format the notes give (a cufile.json-style JSON file); no hardware is
involved. The environment is read on a live root only, so those cases go through a --root tree
marked live by FsRoot's own rule (a root of '/')."""

import json
import os

import check_fixtures as cf
import pytest

from gdsdiag import cuobj_json
from gdsdiag.check.context import CheckContext
from gdsdiag.check.cuobj import check_cuobj
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.verdicts import Status


def _ids(root, env=None):
    return {r.id: r for r in check_cuobj(CheckContext(FsRoot(root), env=env or {}))}


@pytest.fixture
def h200(tmp_path):
    return cf.unpack_h200(str(tmp_path / "h200"))


def test_no_cuobj_anywhere_is_one_info(h200):
    ids = _ids(h200)
    assert list(ids) == ["cuobj.json"] and ids["cuobj.json"].status == Status.INFO
    assert "defaults" in ids["cuobj.json"].summary


def test_rdma_transport_type_left_in_cufile_json_is_named(h200):
    cf.set_cufile(h200, json.dumps({"properties": {"rdma_transport_type": "DC", "allow_compat_mode": True}}))
    r = _ids(h200)["cuobj.json"]
    assert "rdma_transport_type" in r.summary and "cuobj.json" in r.fix


def test_cuobj_file_in_effect_and_differing_keys_warn(h200):
    cf.set_cufile(h200, '{"properties": {"allow_compat_mode": true, "max_direct_io_size_kb": 16384}}')
    cf._write(
        h200,
        "/etc/cuobj.json",
        '{ // cuObject\n "properties": {"allow_compat_mode": false, "max_direct_io_size_kb": 16384}}',
    )
    ids = _ids(h200)
    assert ids["cuobj.json"].status == Status.INFO and "/etc/cuobj.json" in ids["cuobj.json"].summary
    s = ids["cuobj.shared_runtime"]
    assert s.status == Status.WARN and s.summary.startswith("1 setting(s) differ")
    assert any("properties.allow_compat_mode (cufile.json yes, cuobj.json no)" in e.value for e in s.evidence)
    assert "first successful initialization" in s.why.lower() and "separate processes" in s.fix


def test_agreeing_files_are_info_and_parallel_io_is_not_a_difference(h200):
    cf.set_cufile(h200, '{"execution": {"parallel_io": true}, "properties": {"allow_compat_mode": true}}')
    cf._write(
        h200, "/etc/cuobj.json", '{"execution": {"parallel_io": false}, "properties": {"allow_compat_mode": true}}'
    )
    ids = _ids(h200)
    assert ids["cuobj.shared_runtime"].status == Status.INFO
    assert "first of cuFile/cuObject to initialise" in ids["cuobj.shared_runtime"].summary


def test_parallel_io_in_cuobj_json_is_said_to_be_ignored(h200):
    cf._write(h200, "/etc/cuobj.json", '{"execution": {"parallel_io": true}}')
    assert "parallel_io is ignored" in _ids(h200)["cuobj.json"].summary


def test_malformed_cuobj_json_names_the_position(h200):
    cf._write(h200, "/etc/cuobj.json", '{"properties": {"allow_compat_mode": tru}}')
    r = _ids(h200)["cuobj.json"]
    assert r.status == Status.WARN and "line 1 column" in r.summary


def test_snapshot_ignores_the_callers_environment(h200):
    # a snapshot is another node: this process's CUOBJ_* say nothing about it
    ids = _ids(h200, env={"CUOBJ_ENV_PATH_JSON": "/nonexistent.json", "CUOBJ_LOGFILE_PATH": "/tmp"})
    assert list(ids) == ["cuobj.json"]


# --- environment (live root) -------------------------------------------------------------------


def test_selector_replaces_default_and_cufile_selector_does_not_select(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text('{"properties": {"allow_compat_mode": false}}')
    c = cuobj_json.load(FsRoot("/"), {"CUOBJ_ENV_PATH_JSON": str(mine), "CUFILE_ENV_PATH_JSON": "/elsewhere.json"})
    assert c.path == str(mine) and c.found_via == "CUOBJ_ENV_PATH_JSON" and c.fallbacks == []
    c = cuobj_json.load(FsRoot("/"), {"CUFILE_ENV_PATH_JSON": str(mine)})
    assert c.path in (None, "/etc/cuobj.json") and c.path != str(mine)


def test_selector_naming_no_file_warns_and_does_not_fall_back(tmp_path):
    missing = str(tmp_path / "absent.json")
    ids = _ids("/", env={"CUOBJ_ENV_PATH_JSON": missing})
    r = ids["cuobj.json"]
    assert r.status == Status.WARN and missing in r.summary and "does not fall back" in r.summary


def test_cufile_variables_are_fallbacks_only_without_their_cuobj_twin():
    # names from libcufile 1.20.0.107's strings (tests/fixtures/libcufile-strings/): CUOBJ_LOGGING_LEVEL
    # and CUFILE_LOGGING_LEVEL both exist; CUFILE_FORCE_COMPAT_MODE has no CUOBJ_ twin there
    over, fall, unknown = cuobj_json.env_layers(
        {
            "CUFILE_LOGGING_LEVEL": "TRACE",
            "CUOBJ_LOGGING_LEVEL": "INFO",
            "CUFILE_STATS_LEVEL": "1",
            "CUFILE_FORCE_COMPAT_MODE": "true",
            "CUOBJ_LOGING_LEVEL": "x",
            "PATH": "/bin",
        }
    )
    assert over == [("CUOBJ_LOGGING_LEVEL", "INFO")]
    assert fall == [("CUFILE_STATS_LEVEL", "1")]
    assert unknown == ["CUOBJ_LOGING_LEVEL"]
    ids = _ids("/", env={"CUFILE_STATS_LEVEL": "1"})
    assert ids["cuobj.env"].status == Status.INFO
    assert ids["cuobj.env"].summary == "0 CUOBJ_* override(s), 1 CUFILE_* fallback(s) for cuObject"
    assert os.path.exists("/etc/cuobj.json") or ids["cuobj.json"].summary.startswith("no /etc/cuobj.json")
    ids = _ids("/", env={"CUOBJ_LOGING_LEVEL": "x"})
    assert ids["cuobj.env"].status == Status.WARN and "1 unknown CUOBJ_* name(s)" in ids["cuobj.env"].summary


def test_variable_list_is_the_librarys():
    name = os.path.join(
        os.path.dirname(__file__),
        "fixtures",
        "libcufile-strings",
        "libcufile-1.20.0.107-cuobject-and-static-config.txt",
    )
    lines = open(name).read().splitlines()
    assert sorted(cuobj_json.CUOBJ_VARS) == sorted(x for x in lines if x.startswith("CUOBJ_"))


# --- cufile.json's static GPU config (GDS 1.20) ------------------------------------------------


def _static(root):
    from gdsdiag.check.checks import check_cufile_json

    return {r.id: r for r in check_cufile_json(CheckContext(FsRoot(root)))}.get("cufile.static_config")


def test_static_config_states(h200):
    # key names are libcufile 1.20.0.107's (miscellaneous.enable_static_config / static_config_filepath)
    cf.set_cufile(h200, '{"miscellaneous": {"enable_static_config": false}}')
    assert _static(h200) is None
    cf.set_cufile(h200, '{"miscellaneous": {"enable_static_config": true}}')
    assert "unset" in _static(h200).summary
    cf.set_cufile(
        h200, '{"miscellaneous": {"enable_static_config": true, "static_config_filepath": "/etc/gds-static.json"}}'
    )
    assert "does not exist" in _static(h200).summary
    cf._write(h200, "/etc/gds-static.json", "{}")
    r = _static(h200)
    assert r.status == Status.INFO and "not from the node" in r.summary and "regenerate" in r.summary
