"""Every sweep point and every validate --proof cell says why (issue 45), from the one builder
(check/why.py) and `check`'s own node rules, as trace's files do. Each class holds its decisive fact:
change the rule that decides it and its test fails.

Sources, all committed:
- the GPU machine's node: tests/fixtures/snapshots/h200-vm-2026-11-29.tar.gz (one H200 in a VM: no
  nvidia-fs, no PCI P2PDMA, ext4 on a virtio disk, NVIDIA's cufile.json template in /etc);
- its real sweep points: tests/fixtures/gpu-machine/sweep-2026-12-01/goal-results.tgz, smoke.json
  (cufile, cufile-batch, cufile-async, kvikio and bounce, read and write, on /var/tmp/gds-goal: ext4
  on /dev/vda, goal-run.log), and r1-host.json (the host mode);
- its real proof: tests/fixtures/gpu-machine/proof-2026-12-01/validate-proof.json (GPU0 × /var/tmp:
  COMPAT as configured, the compat-forbidden run refused with 5001 and libcufile's own log line);
- nodes the machines lack, built on that snapshot by tests/check_fixtures.py (each value sourced
  there): nvidia-fs loaded with a GDS-aware nvme (P2P possible on the node), the IOMMU translating;
- cufile.json: the real kvikio-zarr-v3 file with allow_compat_mode false (corpus/heldout/cufile-json,
  SOURCES.md), and the snapshot's own NVIDIA template with force_compat_mode set true (the key and its
  effect: NVIDIA cuFile API reference, compatibility mode; ../shared/research/cufile-kvikio.md §2.2).
No capture anywhere holds a GDS-served mount (NVMe with nvidia-fs, NFS over RDMA) beside ACS redirect,
nor a cuFile run that went P2P, so the ACS-decides and the compat-forced-while-P2P-works cells are
not held here by a node fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile

import check_fixtures as cf
import pytest
from conftest import FIXTURES

from gdsdiag.check.context import CheckContext
from gdsdiag.check.facts import NodeFacts
from gdsdiag.platform.roots import node_root, open_snapshot
from gdsdiag.routes import Route, dominant, point_shares
from gdsdiag.sweep.engines import engine
from gdsdiag.sweep.runner import PointRecord, add_whys
from gdsdiag.sweep.why import point_why
from gdsdiag.validate import proof

H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
GPU = os.path.join(FIXTURES, "gpu-machine")
SWEEP_DIR = "/var/tmp/gds-goal"  # the sweeps' --dir on the GPU machine (goal-run.log: ext4 on /dev/vda)
KVIKIO_ZARR = os.path.join(FIXTURES, "corpus", "heldout", "cufile-json", "kvikio-zarr-v3-allow-compat-false.json")


def _sweep_doc(name: str) -> dict:
    with tarfile.open(os.path.join(GPU, "sweep-2026-12-01", "goal-results.tgz")) as t:
        f = t.extractfile(f"./{name}")
        assert f is not None
        return json.load(f)


def _proof_cell() -> dict:
    with open(os.path.join(GPU, "proof-2026-12-01", "validate-proof.json"), encoding="utf-8") as f:
        (cell,) = json.loads("".join(x for x in f if not x.startswith("#")))["proof"]["cells"]
    return cell


def _run(probe: dict) -> dict:
    """A proof run as proof.py holds it (its counters under path_mix), from the document's form."""
    return {**probe, "path_mix": {"routes": probe["routes"]} if probe.get("routes") else None}


@pytest.fixture(scope="module")
def h200():
    return NodeFacts.collect(CheckContext(open_snapshot(H200), env={}))


def _tree(tmp_path, *edits, env: dict | None = None) -> NodeFacts:
    """The snapshot unpacked, nvidia-fs loaded with a GDS-aware nvme (test_check.py's NVFS node),
    then EDITS; its facts read by check's own rules."""
    root = cf.unpack_h200(str(tmp_path / "t"))
    cf.add_nvidia_fs(root)
    cf.add_kallsyms(
        root,
        ("nvme_v1_register_nvfs_dma_ops", "nvme"),
        ("nvme_rdma_v1_register_nvfs_dma_ops", "nvme_rdma"),
        ("nvidia_p2p_get_pages_persistent", "nvidia"),
    )
    cf.add_device_nodes(root)
    cf.add_udev(root)
    for e in edits:
        e(root)
    with node_root(root) as fs:
        return NodeFacts.collect(CheckContext(fs, env=env or {}))


def _why(point: dict, node) -> tuple[list, str]:
    # as the sweep's add_whys: the mode's design comes from its engine (a /1 document's point here)
    mix = point.get("route_mix") or {}
    route = dominant(point_shares(point["route"], mix) or {})
    design = engine(point["mode"]).design_for(route) if point["error"] is None else ""
    return point_why(point["mode"], point["route"], mix, point["error"], node, SWEEP_DIR, design)


# ---- sweep: the GPU machine's real points ---------------------------------------------------


def test_every_cufile_point_of_the_gpu_machine_names_nvidia_fs_then_p2pdma_then_ext4_on_virtio(h200):
    points = [p for p in _sweep_doc("smoke.json")["points"] if p["route"] == "COMPAT"]
    assert {p["mode"] for p in points} == {"cufile", "cufile-batch", "cufile-async", "kvikio"}
    for p in points:
        facts, fix = _why(p, h200)
        assert [(f.fact, f.role) for f in facts[:3]] == [
            ("nvidia-fs", "decisive"),
            ("PCI P2PDMA", "contributing"),
            ("file system", "contributing"),
        ], p["mode"]
        assert (facts[0].value, facts[0].source) == ("nvidia-fs is not loaded", "/proc/modules")
        assert facts[2].value == "ext4 /dev/vda on / (vda (virtio))"
        assert ("measured route", "COMPAT") in [(f.fact, f.value) for f in facts]
        # the key that let it fall back silently, from the cufile.json in effect (NVIDIA's template there)
        assert ("cufile.json allow_compat_mode", "true", "/etc/cufile.json", "contributing") in [
            (f.fact, f.value, f.source, f.role) for f in facts
        ]
        assert fix.startswith("install the nvidia-fs package") and "move the file to a mount GDS serves" in fix


def test_a_bounce_point_is_a_bounce_by_design_of_the_mode(h200):
    (p, _) = [p for p in _sweep_doc("smoke.json")["points"] if p["mode"] == "bounce"]
    facts, fix = _why(p, h200)
    assert (facts[0].fact, facts[0].role, facts[0].source) == ("sweep mode", "decisive", "gdsdiag sweep --mode bounce")
    assert facts[0].value.startswith("a bounce by design of --mode bounce")
    # what cuFile would do on that directory follows, from the same node facts
    assert [f.fact for f in facts[1:4]] == ["measured route", "nvidia-fs", "PCI P2PDMA"]
    assert fix.startswith(
        "none for this mode (a bounce by its design); cuFile would run in compatibility mode here too "
        "(nvidia-fs is not loaded; CONFIG_PCI_P2PDMA is not set)"
    )


def test_host_points_need_no_fix_and_never_read_the_node():
    """A sweep of host points only (r1-host.json) does not read the node: the reader would fail."""
    doc = _sweep_doc("r1-host.json")
    recs = [PointRecord(**{k: p[k] for k in PointRecord.__dataclass_fields__ if k in p}) for p in doc["points"]]

    def no_node():
        raise AssertionError("the node was read for host points")

    add_whys(recs, SWEEP_DIR, node_facts=no_node)
    for r in recs:
        assert r.fix == "none needed" and r.why_chain[0]["fact"] == "sweep mode"
        assert r.why_chain[0]["role"] == "decisive" and "not on the GPU data path" in r.why_chain[0]["value"]


def test_a_p2p_point_needs_nothing_and_an_error_point_leads_with_its_error(h200):
    # (route_mix as a P2P point's counters would give it; the label path is the one above)
    facts, fix = point_why("cufile", "NVFS", {"NVFS": 64}, None, None, SWEEP_DIR)
    assert (facts[0].fact, facts[0].value, fix) == ("cuFile's counters", "NVFS 64 of 64 I/O", "none needed")
    # a point's own failure leads; the node's facts follow as context, not as its cause
    err = "gdsdiag: error: cufile read: 3 of 4 workers completed no I/O"
    facts, fix = point_why("cufile", "ERROR", {}, err, h200, SWEEP_DIR)
    assert [(f.fact, f.value, f.role) for f in facts[:2]] == [
        ("the point", err, "decisive"),
        ("nvidia-fs", "nvidia-fs is not loaded", "contributing"),
    ]
    assert fix.startswith("none known from the node's facts")
    # a cuFile refusal is the node's to explain
    err = "gdsdiag: error: cuFileHandleRegister: CU_FILE_DRIVER_NOT_INITIALIZED (5001): nvidia-fs driver is not loaded"
    facts, fix = point_why("cufile", "ERROR", {}, err, h200, SWEEP_DIR)
    assert (facts[0].fact, facts[0].role) == ("nvidia-fs", "decisive") and fix.startswith("install the nvidia-fs")


def test_a_mixed_point_is_compat_where_any_io_was(h200):
    facts, _ = point_why("cufile", "MIXED(COMPAT=1,NVFS=3)", {"COMPAT": 1, "NVFS": 3}, None, h200, SWEEP_DIR)
    assert facts[0].fact == "nvidia-fs" and ("cuFile's counters", "COMPAT 1, NVFS 3 of 4 I/O") in [
        (f.fact, f.value) for f in facts
    ]


# ---- nodes where P2P is possible and something else forces compat ----------------------------


def test_p2p_possible_on_the_node_but_the_file_system_is_not_served(tmp_path):
    node = _tree(tmp_path)
    assert Route.NVFS in node.routes  # nvidia-fs + a GDS-aware nvme: the node can go P2P
    facts, fix = point_why("cufile", "COMPAT", {"COMPAT": 10}, None, node, SWEEP_DIR)
    assert [(f.fact, f.role) for f in facts[:2]] == [("its mount", "decisive"), ("file system", "contributing")]
    assert facts[0].value == "ext4 on virtio: not an NVMe namespace, so no GDS-aware driver"
    assert fix == "move the file to a mount GDS serves (an NVMe namespace with a GDS-aware driver, NFS over RDMA…)"
    assert not any(f.fact == "nvidia-fs" for f in facts)  # loaded: not a cause


def test_the_iommu_translating_takes_nvfs_away_and_is_the_decisive_fact(tmp_path):
    node = _tree(tmp_path, cf.set_iommu_translating)
    assert Route.NVFS not in node.routes
    facts, fix = point_why("cufile", "COMPAT", {"COMPAT": 10}, None, node, SWEEP_DIR)
    assert (facts[0].fact, facts[0].value, facts[0].role) == ("IOMMU", "translated", "decisive")
    assert facts[0].source.startswith("/sys/kernel/iommu_groups")
    assert fix.startswith("boot with iommu=pt or turn the IOMMU off")


def test_force_compat_mode_in_the_cufile_json_in_effect_is_decisive(tmp_path):
    def forced(root):
        p = os.path.join(root, "etc", "cufile.json")
        text = open(p).read()
        assert text.count('"allow_compat_mode": true,') == 1
        with open(p, "w") as f:
            f.write(text.replace('"allow_compat_mode": true,', '"allow_compat_mode": true, "force_compat_mode": true,'))

    node = _tree(tmp_path, forced)
    facts, fix = point_why("cufile", "COMPAT", {"COMPAT": 10}, None, node, SWEEP_DIR)
    assert (facts[0].fact, facts[0].value, facts[0].source, facts[0].role) == (
        "cufile.json force_compat_mode",
        "true",
        "/etc/cufile.json",
        "decisive",
    )
    assert fix.startswith("set properties.force_compat_mode to false in /etc/cufile.json")


# ---- validate --proof: the GPU machine's real cell --------------------------------------------


def _cell(h200, conf: dict, forb: dict | None, pred_route=Route.COMPAT) -> proof.Cell:
    t = proof.Target("/var/tmp", "other", "ext4", "/", ["vda (virtio, 0000:00:01.0)"], pred_route, [])
    pred = t.predict("GPU0")
    return proof.Cell("GPU0", "0000:00:06.0", t, pred, conf, forb, proof.reconcile(pred, conf, forb)).with_why(h200)


def test_the_gpu_machines_compat_cell_names_nvidia_fs_and_libcufiles_own_line(h200):
    real = _proof_cell()
    cell = _cell(h200, _run(real["configured"]), _run(real["compat_forbidden"]))
    assert cell.outcome.result == real["result"] == "compat"
    chain = cell.to_json()["why_chain"]
    assert (chain[0]["fact"], chain[0]["value"], chain[0]["role"]) == (
        "nvidia-fs",
        "nvidia-fs is not loaded",
        "decisive",
    )
    facts = [(f["fact"], f["value"]) for f in chain]
    assert ("cuFile's counters", "COMPAT 32 of 32 I/O") in facts
    assert any(f == "compat forbidden" and "5001 CU_FILE_DRIVER_NOT_INITIALIZED" in v for f, v in facts)
    assert ("cufile.log", real["compat_forbidden"]["log_tail"][0]) in facts  # libcufile's words
    assert "nvidia-fs.ko driver not loaded" in real["compat_forbidden"]["log_tail"][0]
    assert cell.fix.startswith("install the nvidia-fs package")


def test_allow_compat_mode_false_makes_the_io_fail_and_says_which_file(tmp_path):
    """kvikio-zarr-v3's real cufile.json on the GPU machine's node: the configured run is the real
    run that had compat forbidden there (5001). No route: nvidia-fs decides, and the chain names
    allow_compat_mode false in that file."""

    def kvikio_zarr(root):
        shutil.copy(KVIKIO_ZARR, os.path.join(root, "etc", "cufile.json"))

    root_facts = _tree_plain(tmp_path, kvikio_zarr)
    assert root_facts.allow_compat is False and Route.COMPAT not in root_facts.routes
    failed = _run(_proof_cell()["compat_forbidden"])
    cell = _cell(root_facts, failed, None)
    assert cell.outcome.result == "no_route"
    chain = [(f["fact"], f["value"], f["source"], f["role"]) for f in cell.to_json()["why_chain"]]
    assert chain[0][:2] == ("nvidia-fs", "nvidia-fs is not loaded") and chain[0][3] == "decisive"
    assert ("cufile.json allow_compat_mode", "false", "/etc/cufile.json", "contributing") in chain
    assert any(f == "the probe" and "5001" in v for f, v, _, _ in chain)
    assert cell.fix.startswith("install the nvidia-fs package")


def _tree_plain(tmp_path, *edits) -> NodeFacts:
    root = cf.unpack_h200(str(tmp_path / "p"))
    for e in edits:
        e(root)
    with node_root(root) as fs:
        return NodeFacts.collect(CheckContext(fs, env={}))


def test_a_probe_that_timed_out_leads_with_the_timeout_not_the_node(h200):
    hung = {"ok": False, "stage": "timeout", "name": "TIMEOUT", "code": None, "error": "the probe did not finish"}
    cell = _cell(h200, hung, None)
    assert cell.outcome.result == "no_route"
    assert (cell.why_chain[0]["fact"], cell.why_chain[0]["role"]) == ("the probe", "decisive")
    assert "timeout: the probe did not finish" in cell.why_chain[0]["value"]
    assert cell.fix.startswith("none known from the node's facts")


def test_a_verified_cell_needs_nothing_and_a_mismatch_leads_with_the_bytes(h200):
    conf = {"ok": True, "path_mix": {"routes": {"NVFS": 32}}, "read": {"match": True}, "write": {"match": True}}
    cell = _cell(h200, conf, dict(conf, compat_allowed=False), Route.NVFS)
    assert cell.outcome.result == "verified" and cell.fix == "none needed"
    bad = dict(conf, read={"match": False, "first_diff": 4096, "sha256": "aa", "sha256_expected": "bb"})
    cell = _cell(h200, bad, None, Route.NVFS)
    assert cell.outcome.result == "mismatch" and cell.why_chain[0]["fact"] == "the data read back"


def test_the_text_views_print_the_decisive_fact_and_the_fix_a_line_each(h200):
    from rich.console import Console

    from gdsdiag.render.sweep_out import why_lines
    from gdsdiag.validate import proof_out

    recs = [
        PointRecord(**{k: p[k] for k in PointRecord.__dataclass_fields__ if k in p})
        for p in _sweep_doc("smoke.json")["points"]
    ]
    add_whys(recs, SWEEP_DIR, node_facts=lambda: h200)
    lines = why_lines(recs)
    assert lines[0] == "why cufile (2 points): nvidia-fs: nvidia-fs is not loaded (/proc/modules)"
    assert lines[1].startswith("fix cufile: install the nvidia-fs package")
    assert any(x.startswith("why bounce (2 points): sweep mode: a bounce by design of --mode bounce") for x in lines)
    real = _proof_cell()
    cell = _cell(h200, _run(real["configured"]), _run(real["compat_forbidden"]))
    m = proof.ProofMatrix([("GPU0", "0000:00:06.0")], [cell.target], [cell], 16 << 20, 1 << 20, 60.0)
    con = Console(record=True, width=200)
    proof_out.render(con, m)
    text = con.export_text()
    assert "\n  why: nvidia-fs: nvidia-fs is not loaded (/proc/modules)\n" in text
    assert "\n  fix: install the nvidia-fs package" in text
