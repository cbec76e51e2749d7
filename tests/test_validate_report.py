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


def _node_tree(top, machine_id: str, with_driver: bool):
    """A node's tree named `node` (so two of them share the name a report shows), with its own
    /etc/machine-id; with_driver: the H200 snapshot's real /proc/driver/nvidia files."""
    import os
    import tarfile

    root = top / "node"
    for d in ("proc", "sys", "etc"):
        (root / d).mkdir(parents=True)
    (root / "etc" / "machine-id").write_text(machine_id + "\n")
    if with_driver:
        with tarfile.open(H200) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.startswith("proc/driver/nvidia/"):
                    dst = root / m.name
                    os.makedirs(dst.parent, exist_ok=True)
                    dst.write_bytes(t.extractfile(m).read())
    return root


def test_nodes_with_one_name_are_told_apart_by_machine_id(tmp_path):
    """Two nodes shown by the same name (here both trees are called `node`; in a fleet, cloned VMs
    all called `vm` or `localhost`): the report names each by its machine id, so the FAIL lands on
    the node that failed, in the table, the rule matrix and the JSON."""
    a = _node_tree(tmp_path / "a", "0123456789abcdef0123456789abcdef", with_driver=False)
    b = _node_tree(tmp_path / "b", "fedcba9876543210fedcba9876543210", with_driver=True)
    for root, name in ((a, "a.json"), (b, "b.json")):
        gdsdiag("validate", "--root", str(root), "--json", str(tmp_path / name))
    docs = {n: json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json")}
    ids = {n: d["node"]["machine_id"] for n, d in docs.items()}
    assert all(i and i.startswith("hmac:") for i in ids.values()) and ids["a.json"] != ids["b.json"]
    assert "0123456789abcdef" not in (tmp_path / "a.json").read_text()  # the raw id never leaves the node
    p = gdsdiag("report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json")
    rows = {r["source"].rsplit("/", 1)[-1]: r for r in json.loads(p.stdout)["nodes"]}
    label = {n: f"node (machine {ids[n][5:13]})" for n in ids}
    assert {n: r["node"] for n, r in rows.items()} == label
    assert "drivers.nvidia" in rows["a.json"]["failed"] and "drivers.nvidia" not in rows["b.json"]["failed"]
    assert json.loads(p.stdout)["rules"]["drivers.nvidia"]["FAIL"] == [label["a.json"]]
    text = gdsdiag("report", str(tmp_path / "a.json"), str(tmp_path / "b.json")).stdout
    assert label["a.json"] in text and label["b.json"] in text


def test_reports_of_one_node_keep_its_name_and_old_reports_show_their_file(tmp_path, reports):
    """The same machine validated twice is one node: its plain name. Reports without ids (written
    before validate recorded them) that share a name are told apart by their file."""
    root = _node_tree(tmp_path / "a", "0123456789abcdef0123456789abcdef", with_driver=True)
    for name in ("1.json", "2.json"):
        gdsdiag("validate", "--root", str(root), "--json", str(tmp_path / name))
    p = gdsdiag("report", str(tmp_path / "1.json"), str(tmp_path / "2.json"), "--json")
    assert [r["node"] for r in json.loads(p.stdout)["nodes"]] == ["node", "node"]
    old = []
    for n in ("measured.json", "static.json"):  # the same snapshot twice: no id in a snapshot
        d = json.loads((reports / n).read_text())
        assert d["node"]["machine_id"] is None and d["node"]["boot_id"] is None
        old.append(str(reports / n))
    p = gdsdiag("report", *old, "--json")
    assert sorted(r["node"] for r in json.loads(p.stdout)["nodes"]) == [
        "h200-vm-2026-11-29.tar.gz (measured.json)",
        "h200-vm-2026-11-29.tar.gz (static.json)",
    ]


def test_live_node_ids_are_keyed_hashes_of_the_real_files():
    import hashlib
    import hmac
    import os

    from gdsdiag.platform.fsroot import FsRoot
    from gdsdiag.validate.runner import _NODE_ID_KEY, node_ids

    ids = node_ids(FsRoot("/"))
    for key, path in (("machine_id", "/etc/machine-id"), ("boot_id", "/proc/sys/kernel/random/boot_id")):
        if not os.path.exists(path) or not open(path).read().strip():
            assert ids[key] is None
            continue
        raw = open(path).read().strip().replace("-", "").lower()
        assert ids[key] == "hmac:" + hmac.new(_NODE_ID_KEY, raw.encode(), hashlib.sha256).hexdigest()[:16]
    assert ids["boot_id"] is not None  # every Linux kernel has one
