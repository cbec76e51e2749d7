"""Issue 42, item 7: a forged or self-contradictory input never earns a definite PASS or route.
`validate --sweep-results` cross-checks a sweep document's numbers against each other (cuFile
counters, route mix, route label, GB/s against bytes/seconds and the link ceiling); `report` never
prints "worst PASS" beside a failed rule; `check --from` does not claim the NVFS route from a
snapshot with no NVMe device or an nvidia-fs release that does not exist. The references for what is
consistent are the real captures in tests/fixtures (each passes every cross-check)."""

import copy
import glob
import json
import os
import subprocess
import sys

import pytest
from check_fixtures import H200

from gdsdiag.validate.consistency import sweep_problems

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "fixtures", "gpu-machine", "fio-windows-2026-12-02", "r1-sweep.json")
# a policy that would pass this node's real compat-mode sweep: only the cross-checks can fail it
POLICY = "routes: {allowed: [NVFS, P2PDMA, RDMA, COMPAT]}\nio: {max_compat_share: 0.5}\nsweep: {min_gbps: {}}\n"


def gdsdiag(*args):
    return subprocess.run([sys.executable, "-m", "gdsdiag", *args], capture_output=True, text=True, timeout=120)


def _real():
    with open(REAL) as f:
        return json.load(f)


def _validate(tmp_path, doc):
    sw = tmp_path / "sweep.json"
    sw.write_text(json.dumps(doc))
    pol = tmp_path / "policy.yaml"
    pol.write_text(POLICY)
    p = gdsdiag(
        "validate", "--from", H200, "--keep-going", "--policy", str(pol), "--sweep-results", str(sw), "--json", "-"
    )
    assert p.returncode in (0, 1, 2), p.stderr
    return p.returncode, {r["rule"]: r for r in json.loads(p.stdout)["rules"]}


def _forged_nvfs():
    """The issue's document: its counters say 21,340 POSIX and 0 NVFS, its route_mix and label say
    NVFS, and its throughput (bytes scaled along) is 8x its own link ceiling."""
    doc = _real()
    p = doc["points"][0]
    p["route_mix"] = {"NVFS": 21340}
    p["route"] = "NVFS"
    p["summary"]["bytes"] = int(8 * 63.02e9 * p["summary"]["seconds"])
    p["summary"]["gbps"] = round(p["summary"]["bytes"] / p["summary"]["seconds"] / 1e9, 4)
    return doc


def test_every_real_sweep_capture_is_consistent():
    found = 0
    for path in glob.glob(os.path.join(HERE, "fixtures", "gpu-machine", "**", "*.json"), recursive=True):
        with open(path) as f:
            try:
                doc = json.load(f)
            except ValueError:
                continue
        if isinstance(doc, dict) and doc.get("schema") == "gdsdiag.sweep/1":
            found += 1
            assert sweep_problems(doc, path) == [], path
    assert found >= 7


def test_the_real_sweep_is_judged_on_its_numbers(tmp_path):
    _, rules = _validate(tmp_path, _real())
    assert rules["io.compat_share"]["status"] == "FAIL"  # 100 % COMPAT against 50 %: the real verdict
    assert "inconsistent" not in rules["io.compat_share"]["summary"]


def test_the_issues_forged_document_earns_no_pass(tmp_path):
    code, rules = _validate(tmp_path, _forged_nvfs())
    share = rules["io.compat_share"]
    assert share["status"] == "FAIL" and share["summary"].startswith("inconsistent input: "), share
    text = " ".join(e["value"] for e in share["evidence"])
    assert "route_mix says NVFS, its cuFile counters say COMPAT" in text
    assert "8.0x its own link ceiling (63.02 GB/s)" in text
    assert "labelled NVFS" in text
    assert code == 2


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda p: p.update(route_mix={"NVFS": 21340}), "route_mix says NVFS"),
        (lambda p: p["summary"].update(gbps=0.5), "bytes in"),
        (lambda p: p.update(route="P2PDMA"), "labelled P2PDMA"),
        (lambda p: p["route_detail"]["cufile_stats"]["routes"].update(NVFS=21340, COMPAT=0), "posix I/Os but 0 COMPAT"),
    ],
    ids=["route_mix", "gbps", "label", "routes-vs-op-counters"],
)
def test_one_edited_number_is_an_inconsistent_input(edit, said):
    doc = _real()
    edit(doc["points"][0])
    problems = sweep_problems(doc, "s.json")
    assert problems and any(said in x for x in problems), problems


def test_a_route_mix_of_the_wrong_shape_is_one_line(tmp_path):
    """Item 8: a list (or text) where the route mix belongs crashed validate."""
    for bad in (["NVFS", 3], "NVFS", {"NVFS": "many"}, {"NVFS": [1]}):
        doc = _real()
        doc["points"][0]["route_mix"] = bad
        sw = tmp_path / "sweep.json"
        sw.write_text(json.dumps(doc))
        p = gdsdiag("validate", "--from", H200, "--keep-going", "--sweep-results", str(sw))
        assert p.returncode == 3 and p.stderr.count("\n") == 1 and "route_mix" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


def test_forged_counters_in_a_copy_do_not_change_the_original():
    doc = _real()
    forged = copy.deepcopy(doc)
    forged["points"][0]["route_mix"] = {"NVFS": 1}
    assert sweep_problems(doc, "a") == [] and sweep_problems(forged, "b")


# --- report: a verdict its own rules contradict


def _report_doc(tmp_path):
    """The real H200 VM judged on its real sweep: io.compat_share fails (100 % COMPAT)."""
    v = tmp_path / "v.json"
    p = gdsdiag("validate", "--from", H200, "--keep-going", "--sweep-results", REAL, "--json", str(v))
    assert p.returncode in (0, 1, 2), p.stderr
    return json.loads(v.read_text())


def test_report_never_prints_worst_pass_beside_a_failed_rule(tmp_path):
    doc = _report_doc(tmp_path)
    assert any(r["status"] == "FAIL" for r in doc["rules"])
    doc["verdict"] = "PASS"  # the forgery: the verdict line only
    f = tmp_path / "forged.json"
    f.write_text(json.dumps(doc))
    p = gdsdiag("report", str(f))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "worst PASS" not in p.stdout and "worst FAIL" in p.stdout
    assert "inconsistent" in p.stdout  # (the cell folds the sentence; the JSON below has it whole)
    j = json.loads(gdsdiag("report", str(f), "--json").stdout)
    assert j["verdict"] == "FAIL"
    assert j["nodes"][0]["inconsistent"] == "inconsistent input: the report says PASS, its rules FAIL"


@pytest.mark.parametrize("field, value", [("verdict", "GREAT"), ("status", "OK")])
def test_report_with_an_unknown_verdict_or_status_earns_no_pass(tmp_path, field, value):
    doc = _report_doc(tmp_path)
    if field == "verdict":
        doc["verdict"] = value
    else:
        for r in doc["rules"]:
            r["status"] = value
        doc["verdict"] = "PASS"
    f = tmp_path / "forged.json"
    f.write_text(json.dumps(doc))
    j = json.loads(gdsdiag("report", str(f), "--json").stdout)
    assert j["verdict"] == "FAIL" and "is none of" in j["nodes"][0]["inconsistent"]


def test_a_real_report_is_consistent(tmp_path):
    f = tmp_path / "v.json"
    f.write_text(json.dumps(_report_doc(tmp_path)))
    j = json.loads(gdsdiag("report", str(f), "--json").stdout)
    assert j["nodes"][0]["inconsistent"] is None


# --- check --from: the NVFS route from a snapshot whose evidence does not fit together


def _snapshot(tmp_path, version="2.25.7", symbols=(("nvme_v1_register_nvfs_dma_ops", "nvme"),)):
    """The real H200 VM snapshot (no NVMe function) with nvidia-fs added, packed as --from takes it."""
    import tarfile

    import check_fixtures as cf

    root = cf.unpack_h200(str(tmp_path / "t"))
    cf.add_nvidia_fs(root)
    cf._write(root, "/sys/module/nvidia_fs/version", version + "\n")
    cf.add_kallsyms(root, *symbols, ("nvidia_p2p_get_pages_persistent", "nvidia"))
    cf.add_device_nodes(root)
    out = tmp_path / "node.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for name in sorted(os.listdir(root)):
            tar.add(os.path.join(root, name), arcname=name)
    return str(out)


def _routes(snapshot):
    p = gdsdiag("check", "--from", snapshot, "--json")
    assert p.returncode in (0, 1, 2), p.stderr
    doc = json.loads(p.stdout)
    return doc["verdict"], {c["id"]: c for c in doc["checks"]}


def test_no_nvme_device_does_not_earn_the_nvfs_route(tmp_path):
    verdict, checks = _routes(_snapshot(tmp_path))
    assert "NVFS" not in verdict["routes"] and "NVFS not claimed" in verdict["summary"], verdict
    assert checks["snapshot.consistency"]["status"] == "WARN"
    assert "no NVMe device" in checks["snapshot.consistency"]["summary"]


def test_an_unknown_nvidia_fs_release_does_not_earn_the_nvfs_route(tmp_path):
    nvmeof = (("nvme_rdma_v1_register_nvfs_dma_ops", "nvme_rdma"),)
    verdict, checks = _routes(_snapshot(tmp_path, "99.99.99", nvmeof))
    assert "NVFS" not in verdict["routes"], verdict
    assert "99.99.99 is no known release" in checks["snapshot.consistency"]["summary"]


def test_a_consistent_snapshot_keeps_its_nvfs_route(tmp_path):
    nvmeof = (("nvme_rdma_v1_register_nvfs_dma_ops", "nvme_rdma"),)
    verdict, checks = _routes(_snapshot(tmp_path, "2.28.4", nvmeof))
    assert "NVFS" in verdict["routes"] and "snapshot.consistency" not in checks, verdict
