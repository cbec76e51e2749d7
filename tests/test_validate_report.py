"""gdsdiag report: the fleet view over validate reports of the real H200 snapshot (one with the real
H200 sweep, one static)."""

import json
import subprocess
import sys

import pytest
from check_fixtures import H200
from sweep_fixture import h200_sweep_doc


def gdsdiag(*args):
    return subprocess.run([sys.executable, "-m", "gdsdiag", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet")
    sw = d / "sweep.json"
    sw.write_text(json.dumps(h200_sweep_doc()))
    a = gdsdiag("validate", "--from", H200, "--sweep-results", str(sw), "--json", str(d / "measured.json"))
    b = gdsdiag("validate", "--from", H200, "--json", str(d / "static.json"))
    assert a.returncode == 2 and b.returncode == 0, a.stderr + b.stderr
    return d


def test_fleet_json(reports):
    p = gdsdiag("report", str(reports / "measured.json"), str(reports / "static.json"), "--json")
    assert p.returncode == 2, p.stderr  # worst node verdict
    doc = json.loads(p.stdout)
    assert doc["schema"] == "gdsdiag.report/1" and doc["verdict"] == "FAIL"
    first, second = doc["nodes"]
    assert first["verdict"] == "FAIL" and "io.compat_share" in first["failed"] and second["verdict"] == "PASS"
    assert first["gbps"]["read 1m"] == pytest.approx(2.1943)  # best cuFile point; host/bounce excluded
    assert first["gbps"]["read 16m"] == pytest.approx(
        max(
            p["summary"]["gbps"]
            for p in h200_sweep_doc()["points"]
            if p["mode"] in ("cufile", "kvikio") and p["rw"] == "read" and p["bs"] == 16 << 20
        )
    )
    assert doc["rules"]["io.compat_share"]["FAIL"] == [first["node"]]


def test_fleet_table_and_png(reports, tmp_path):
    png = tmp_path / "fleet.png"
    p = gdsdiag("report", str(reports / "measured.json"), str(reports / "static.json"), "--png", str(png))
    assert p.returncode == 2 and "rules not passing everywhere" in p.stdout and "read 1m GB/s" in p.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    p = gdsdiag("report", str(reports / "measured.json"), "--png", str(png))
    assert p.returncode == 3 and "exists" in p.stderr


def test_bad_inputs(reports, tmp_path):
    other = tmp_path / "sweep.json"
    other.write_text(json.dumps(h200_sweep_doc()))
    p = gdsdiag("report", str(other))
    assert p.returncode == 3 and "not a gdsdiag.validate/1 report" in p.stderr and p.stderr.count("\n") == 1
    p = gdsdiag("report", str(tmp_path / "missing.json"))
    assert p.returncode == 4 and "cannot read" in p.stderr  # names nothing: a usage error (issue 23)
