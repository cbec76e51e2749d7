"""`topology --json` to a pipe writes documents/topology.document_text: the pairs' JSON put
together from pieces (PairAnalysis.json_text) instead of the encoder walking their dicts. It must
be the very bytes of the compact encoding of `document()`, the record's definition, on every tree
the suite has: a change to one side alone fails here."""

import json
import os
import subprocess

import pytest
from conftest import CORPUS, FIXTURES, GDSDIAG
from hgx_fixture import build_dgx2h

from gdsdiag.commands._common import json_text
from gdsdiag.documents.topology import document, document_text
from gdsdiag.topology.report import TopologyReport, topology

SNAPSHOTS = sorted(
    os.path.join(FIXTURES, "snapshots", f)
    for f in os.listdir(os.path.join(FIXTURES, "snapshots"))
    if f.endswith(".tar.gz")
)
LSPCI = [
    # a PLX switch with ACS redirect on its downstream ports (lspci -vvxxx: the config bytes)
    (os.path.join(CORPUS, "lspci-vvv", "arm-n1sdp-plx-pex8749-acs-redir-on-dsp-lspci-vvxxx.txt"),),
    # an 8-GPU box: lspci -tv
    (os.path.join(CORPUS, "lspci-tree", "gigabyte-e251-u70-pex8747-cx6dx-v100-same-switch.txt"),),
]


def _both(report):
    parts = (report.topo, report.pairs, report.findings, report.cross_check, report.routing)
    return document_text(report), json_text(document(*parts, cross_check_input=report.cross_check_input), pretty=False)


def _same(fast: str, reference: str, what: str = "") -> None:
    # where they part, not pytest's diff of two long strings (minutes on a large document)
    if fast != reference:
        at = next((i for i, (x, y) in enumerate(zip(fast, reference)) if x != y), min(len(fast), len(reference)))
        pytest.fail(
            f"{what} document_text differs at {at}: {fast[at - 60 : at + 60]!r} vs {reference[at - 60 : at + 60]!r}"
        )


def _check(report):
    fast, reference = _both(report)
    _same(fast, reference)
    return json.loads(fast)


@pytest.mark.parametrize("acs_redirect", [False, True])
def test_dgx2h_tree_same_bytes(tmp_path, acs_redirect):
    build_dgx2h(str(tmp_path), acs_redirect=acs_redirect)
    doc = _check(topology(str(tmp_path)))
    # the tree has pairs with hops below their maximum, ACS redirect lists and reasons to write
    assert len(doc["pairs"]) > 100
    if acs_redirect:
        assert any(p["acs_redirect_bridges"] and p["reasons"] for p in doc["pairs"])


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=os.path.basename)
def test_snapshots_same_bytes(snapshot):
    _check(topology(snapshot=snapshot))


def test_nvlink_pairs_and_cross_check_same_bytes():
    # the two-H200 machine (NV18) with its captured nvidia-smi topo -m: NVLink pairs and cross_check
    snapshot = next(s for s in SNAPSHOTS if "h200x2" in s)
    smi = os.path.join(FIXTURES, "nvidia-smi", "h200x2-vm-topo-m.txt")
    doc = _check(topology(snapshot=snapshot, cross_check=True, smi_file=smi))
    assert any(p["nvlink"] for p in doc["pairs"]) and "cross_check" in doc


@pytest.mark.parametrize("files", LSPCI, ids=lambda f: os.path.basename(f[0]))
def test_lspci_imports_same_bytes(files):
    _check(topology(lspci_files=files))


def test_hwloc_trees_same_bytes(hwloc_trees):
    from gdsdiag.topology.findings import find
    from gdsdiag.topology.load import from_root
    from gdsdiag.topology.pairs import analyse_all

    for name in hwloc_trees:
        topo = from_root(hwloc_trees[name])
        pairs = analyse_all(topo)
        report = TopologyReport(topo, pairs, find(topo, pairs))
        _same(document_text(report), json_text(document(topo, pairs, report.findings), pretty=False), name)


def test_installed_command_writes_the_reference_bytes(tmp_path):
    """What the installed console script prints to a pipe is the compact encoding of the document."""
    build_dgx2h(str(tmp_path / "t"), acs_redirect=True)
    r = subprocess.run(
        [*GDSDIAG, "topology", "--root", str(tmp_path / "t"), "--json"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode in (0, 1, 2), r.stderr
    report = topology(str(tmp_path / "t"))
    _same(r.stdout, _both(report)[1] + "\n", "the command's")
