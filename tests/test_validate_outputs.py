"""validate outputs: JSON (gdsdiag.validate/1), JUnit parsed back with junitparser, the Prometheus
textfile checked by promtool and by prometheus_client's parser; CLI exit codes and file safety."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from check_fixtures import H200
from sweep_fixture import h200_sweep_doc

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "fixtures", "trace", "trace-h200-cufile.jsonl.gz")


def gdsdiag(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "gdsdiag", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("out")
    sw = d / "sweep.json"
    sw.write_text(json.dumps(h200_sweep_doc()))
    p = gdsdiag(
        "validate",
        "--from",
        H200,
        "--sweep-results",
        str(sw),
        "--trace-replay",
        TRACE,
        "--json",
        str(d / "v.json"),
        "--junit",
        str(d / "v.xml"),
        "--prom",
        str(d / "v.prom"),
    )
    return d, p


def test_exit_code_is_worst_verdict(outputs):
    d, p = outputs
    doc = json.loads((d / "v.json").read_text())
    assert p.returncode == 2 == doc["exit_code"] and doc["verdict"] == "FAIL", p.stderr
    assert "FAIL io.compat_share" in p.stdout and "evidence:" in p.stdout


def test_json_document(outputs):
    d, _ = outputs
    doc = json.loads((d / "v.json").read_text())
    assert doc["schema"] == "gdsdiag.validate/1"
    assert doc["node"]["snapshot_id"].startswith("sha256:") and doc["tool_version"] == doc["node"]["tool_version"]
    from gdsdiag.validate.rules import RULES

    assert [r["rule"] for r in doc["rules"]] == [r.id for r in RULES]
    for r in doc["rules"]:
        assert set(r) == {"rule", "title", "status", "summary", "evidence", "fix", "source", "stage"}
        assert r["status"] in ("PASS", "WARN", "FAIL", "SKIP")
    assert sum(doc["counts"].values()) == len(RULES)
    assert doc["route_ratio"]["COMPAT"] == pytest.approx(1.0)
    assert doc["trace"] == {"COMPAT": {"count": 18, "bytes": 106430564}}
    assert doc["sweeps"][0]["points"][0].keys() >= {"mode", "rw", "bs", "threads", "gbps", "p99_us", "route"}
    assert doc["policy"]["source"] == "default" and "io" in doc["policy"]["values"]


def test_junit_parses_back(outputs):
    junitparser = pytest.importorskip("junitparser")
    d, _ = outputs
    xml = junitparser.JUnitXml.fromfile(str(d / "v.xml"))
    suites = list(xml) if isinstance(xml, junitparser.JUnitXml) else [xml]
    cases = [c for s in suites for c in s]
    doc = json.loads((d / "v.json").read_text())
    assert len(cases) == len(doc["rules"])
    by = {c.name: c for c in cases}
    for r in doc["rules"]:
        c = by[r["rule"]]
        kinds = {type(x).__name__ for x in c.result}
        assert ("Failure" in kinds) == (r["status"] == "FAIL")
        assert ("Skipped" in kinds) == (r["status"] == "SKIP")
    fail = by["io.compat_share"].result[0]
    assert "COMPAT" in fail.message and "fix:" in fail.text
    assert suites[0].failures == doc["counts"]["FAIL"] and suites[0].skipped == doc["counts"]["SKIP"]


def test_prometheus_textfile(outputs):
    d, _ = outputs
    text = (d / "v.prom").read_text()
    from prometheus_client.parser import text_string_to_metric_families

    fams = {f.name: f for f in text_string_to_metric_families(text)}
    rp = {s.labels["rule"]: s.value for s in fams["gdsdiag_rule_pass"].samples}
    assert rp["io.compat_share"] == 0 and rp["drivers.nvidia"] == 1 and "routes.per_mount" not in rp  # SKIP absent
    g = [
        s
        for s in fams["gdsdiag_sweep_gbps"].samples
        if s.labels["mode"] == "cufile"
        and s.labels["rw"] == "read"
        and s.labels["bs"] == str(1 << 20)
        and s.labels["threads"] == "4"
    ]
    assert (
        len(g) == 1
        and g[0].value == pytest.approx(2.1943)
        and g[0].labels["gpu"] == "0"
        and g[0].labels["mount"] == "/var/tmp/sw"
    )
    assert {s.labels["route"]: s.value for s in fams["gdsdiag_io_route_ratio"].samples} == {"COMPAT": 1.0}
    status = [s for s in fams["gdsdiag_rule_status"].samples if s.labels["rule"] == "io.compat_share" and s.value == 1]
    assert [s.labels["status"] for s in status] == ["FAIL"]


def test_promtool_check_metrics(outputs):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus')")
    d, _ = outputs
    p = subprocess.run(
        [promtool, "check", "metrics"], input=(d / "v.prom").read_text(), capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_never_overwrites_json_or_junit_and_replaces_only_own_prom(outputs, tmp_path):
    d, _ = outputs
    p = gdsdiag("validate", "--from", H200, "--json", str(d / "v.json"))
    assert p.returncode == 3 and "exists" in p.stderr and p.stderr.count("\n") == 1
    own = tmp_path / "own.prom"
    shutil.copy(d / "v.prom", own)
    p = gdsdiag("validate", "--from", H200, "--prom", str(own))
    assert p.returncode == 0, p.stderr  # static run on the snapshot: all pass/skip
    assert "gdsdiag_rule_pass" in own.read_text() and "gdsdiag_sweep_gbps{" not in own.read_text()
    foreign = tmp_path / "node.prom"
    foreign.write_text("# HELP node_something x\n")
    p = gdsdiag("validate", "--from", H200, "--prom", str(foreign))
    assert p.returncode == 3 and "not written by gdsdiag" in p.stderr
    assert foreign.read_text() == "# HELP node_something x\n"


def test_policy_allowing_compat_passes_the_share(tmp_path):
    sw = tmp_path / "sweep.json"
    sw.write_text(json.dumps(h200_sweep_doc()))
    pol = tmp_path / "compat.yaml"
    pol.write_text(
        "routes: {allowed: [NVFS, P2PDMA, RDMA, COMPAT]}\nio: {max_compat_share: 1.0}\nsweep: {min_gbps: {1m: 0.5}}\n"
    )
    p = gdsdiag("validate", "--from", H200, "--policy", str(pol), "--sweep-results", str(sw), "--json", "-")
    doc = json.loads(p.stdout)
    st = {r["rule"]: r["status"] for r in doc["rules"]}
    assert st["io.compat_share"] == "PASS" and doc["verdict"] == "PASS" and p.returncode == 0


def test_bad_policy_and_usage_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("io: {max_compat_share: 2}\n")
    p = gdsdiag("validate", "--from", H200, "--policy", str(bad))
    assert p.returncode == 3 and "not a share between 0 and 1" in p.stderr and p.stderr.count("\n") == 1
    p = gdsdiag("validate", "--from", H200, "--quick", "--path", "/tmp")
    assert p.returncode == 4 and "need the node itself" in p.stderr  # a usage error (issue 23)
    p = gdsdiag("validate", "--show-policy")
    assert p.returncode == 0 and "max_compat_share" in p.stdout


GPU = os.path.join(HERE, "fixtures", "gpu-machine")


@pytest.mark.parametrize(
    "name,verdict,failed",
    [("validate-default", "FAIL", {"routes.per_mount", "io.compat_share"}), ("validate-compat", "PASS", set())],
)
def test_gpu_machine_outputs(name, verdict, failed):
    """The outputs 'gdsdiag validate --quick' wrote on the H200 VM (compat mode): JSON, JUnit, textfile."""
    junitparser = pytest.importorskip("junitparser")
    doc = json.load(open(os.path.join(GPU, name + ".json")))
    assert doc["verdict"] == verdict and {r["rule"] for r in doc["rules"] if r["status"] == "FAIL"} == failed
    cs = next(r for r in doc["rules"] if r["rule"] == "io.compat_share")
    assert "100.0% COMPAT" in cs["summary"] and any("'COMPAT':" in e["value"] for e in cs["evidence"])
    suite = list(junitparser.JUnitXml.fromfile(os.path.join(GPU, name + ".xml")))[0]
    assert suite.tests == len(doc["rules"]) and suite.failures == len(failed)
    text = open(os.path.join(GPU, name + ".prom")).read()
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    assert 'gdsdiag_io_route_ratio{route="COMPAT"} 1.0' in text
