"""Paths host tracing cannot see (gdsdiag/check/untraced.py, issue 47 goal 4): NVMe functions on a
kernel-bypass driver and cuObject endpoints with an RDMA path, as `check` results, `check --json`'s
`untraced` and the trace's why. Trees: the GPU machine's real snapshot with the NVMe functions of
tests/fixtures/untraced's captures (README there), and hwloc's real sysfs with an InfiniBand HCA."""

import json

import check_fixtures as cf
import pytest
from rich.console import Console

from gdsdiag.check.context import CheckContext
from gdsdiag.check.facts import INVISIBLE, NodeFacts
from gdsdiag.check.report import check
from gdsdiag.check.why import file_why, untraced_why
from gdsdiag.documents.check import document
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.routes import Route
from gdsdiag.verdicts import Status


@pytest.fixture
def h200(tmp_path):
    return cf.unpack_h200(str(tmp_path / "h200"))


def _ids(rep):
    return {r.id: r for r in rep.results if r.path is None}


def test_nvme_on_spdk_and_vfio_drivers_is_named_with_its_sysfs_evidence(h200):
    added = cf.add_bypassed_nvme(h200)
    assert added == ["0000:65:00.0", "0000:e3:00.0", "0000:02:00.0"]
    rep = check(h200)
    r = _ids(rep)["untraced.nvme_bypass"]
    assert r.status == Status.INFO and r.summary == (
        "3 NVMe controller(s) off the kernel's nvme driver (0000:02:00.0 vfio-pci, 0000:65:00.0 uio_pci_generic, "
        f"0000:e3:00.0 uio_pci_generic): their I/O is {INVISIBLE}"
    )
    ev = {(e.source, e.value) for e in r.evidence}
    assert ("/sys/bus/pci/devices/0000:65:00.0/driver", "uio_pci_generic") in ev
    assert ("/sys/bus/pci/devices/0000:e3:00.0/driver", "uio_pci_generic") in ev
    assert ("/sys/bus/pci/devices/0000:02:00.0/driver", "vfio-pci") in ev
    assert ("/sys/bus/pci/devices/0000:02:00.0/class", "0x010802") in ev
    assert "spdk/spdk#1887" in r.why
    # check --json: a route per path (UNKNOWN: the program picks the memory the reads land in)
    doc = json.loads(json.dumps(document(rep)))
    by = {u["target"]: u for u in doc["untraced"]}
    assert set(by) == {"0000:65:00.0", "0000:e3:00.0", "0000:02:00.0"}
    assert all(u["kind"] == "nvme_bypass" and u["route"] == "UNKNOWN" for u in by.values())
    assert by["0000:65:00.0"]["deciding"].startswith("NVMe 0000:65:00.0 (8086:4140) on uio_pci_generic")
    assert by["0000:02:00.0"]["evidence"][0] == {
        "source": "/sys/bus/pci/devices/0000:02:00.0/driver",
        "value": "vfio-pci",
    }
    # the text names them
    from gdsdiag.render.check_text import render

    con = Console(record=True, width=300)
    render(con, rep)
    text = con.export_text()
    assert "Paths host tracing cannot see" in text and "0000:65:00.0: UNKNOWN — NVMe 0000:65:00.0" in text


def test_nvme_on_the_kernel_driver_passes_and_a_node_without_nvme_says_nothing(h200):
    rep = check(h200)  # the GPU machine: no NVMe function at all
    assert "untraced.nvme_bypass" not in _ids(rep) and rep.untraced == []
    assert cf.add_kernel_nvme(h200) == ["0000:00:07.0"]
    rep = check(h200)
    r = _ids(rep)["untraced.nvme_bypass"]
    assert (
        r.status == Status.PASS and r.summary == "no NVMe controller on a kernel-bypass driver (drivers bound: nvme: 1)"
    )
    assert rep.untraced == []


def test_cuobject_endpoint_with_an_rdma_path_is_untraced(hwloc_trees, tmp_path):
    from test_check_targets import _cuobj

    ctx = CheckContext(hwloc_trees["40intel64-2g2n4c+pci"], env={})
    ctx.__dict__["cuobj"] = _cuobj(tmp_path, {"rdma_dev_addr_list": ["ib0", "eth0"]})
    from gdsdiag.check.untraced import check_untraced, untraced_paths

    (u,) = untraced_paths(ctx)  # eth0 has no RDMA device: not a path
    assert u.kind == "cuobject_rdma" and u.target == "ib0" and u.route == Route.DRAM_BOUNCE
    assert u.deciding == "cuObject endpoint ib0 (qib0): GET/PUT by RDMA into host memory, then copied"
    assert {(e.source, e.value) for e in u.evidence} == {
        ("/etc/cuobj.json", "properties.rdma_dev_addr_list: ib0"),
        ("/sys/class/infiniband/qib0/ports/*/state", "port 1: 4: ACTIVE"),
    }
    (r,) = [r for r in check_untraced(ctx) if r.id == "untraced.cuobject_rdma"]
    assert r.status == Status.INFO
    assert r.summary == f"1 cuObject endpoint(s) with an RDMA path (ib0 DRAM_BOUNCE): their transfers are {INVISIBLE}"


def _node(root):
    return NodeFacts.collect(CheckContext(FsRoot(root), env={}))


def test_trace_says_invisible_when_it_saw_none_of_the_programs_bytes(h200):
    cf.add_bypassed_nvme(h200)
    node = _node(h200)
    # (the trace reads check --json's document: the same facts come through it)
    rep = check(h200)
    again = NodeFacts.from_check_json(json.loads(json.dumps(document(rep))), None)
    assert again.untraced == node.untraced and len(node.untraced) == 1
    u = untraced_why(node, [])
    assert u is not None and u["seen_to_gpu_bytes"] == 0
    lead = u["why_chain"][0]
    assert lead["role"] == "decisive" and lead["value"].endswith(INVISIBLE)
    assert lead["value"].startswith("the trace saw no file I/O")
    assert u["why_chain"][1]["fact"] == "NVMe controllers on a kernel-bypass driver"
    assert u["why_chain"][1]["source"] == "/sys/bus/pci/devices/0000:02:00.0/driver"
    assert "validate --proof" in u["fix"]
    host = {"path": "/var/tmp/a", "bytes": 4096, "routes": {"HOST": 4096}}
    assert untraced_why(node, [host])["why_chain"][0]["value"].startswith("the trace saw none reach a GPU (1 file(s)")
    bounced = {"path": "/var/tmp/b", "bytes": 8192, "routes": {"DRAM_BOUNCE": 8192}}
    got = untraced_why(node, [host, bounced])
    assert (
        got["seen_to_gpu_bytes"] == 8192 and "reach a GPU; bytes over the node's paths" in got["why_chain"][0]["value"]
    )
    # every file's why chain names them too (never decisive: they say what the trace could not see)
    facts, _ = file_why({"path": "/var/tmp/a", "routes": {"HOST": 4096}}, node, None)
    assert facts[-1].fact == "NVMe controllers on a kernel-bypass driver" and facts[-1].role == "contributing"


def test_no_untraced_answer_without_such_a_path_or_without_the_node(h200):
    assert untraced_why(_node(h200), []) is None  # the GPU machine as it is
    assert untraced_why(None, []) is None  # a replay
    facts, _ = file_why({"path": "/var/tmp/a", "routes": {"HOST": 1}}, _node(h200), None)
    assert all("kernel-bypass" not in f.fact for f in facts)


def test_trace_asks_for_the_node_when_a_gpu_program_moved_no_file_bytes_to_a_gpu():
    from gdsdiag.trace.model.classify import Classifier

    clf = Classifier()
    assert not clf.needs_node_facts() and not clf.needs_node_facts(False)
    assert clf.needs_node_facts(True)  # libcuda mapped, nothing seen: the node's untraced paths may say why


def test_trace_summary_carries_and_prints_the_untraced_answer(h200):
    from gdsdiag.render.trace_out import render_summary
    from gdsdiag.trace.result import TraceResult

    cf.add_bypassed_nvme(h200)
    u = untraced_why(_node(h200), [])
    res = TraceResult(0, {}, [], [], 0, 0, untraced=u)
    assert res.summary_json()["untraced"] == u
    con = Console(record=True, width=400)
    render_summary(con, res, False)
    text = con.export_text()
    assert "not seen by the trace:" in text
    assert f"the trace saw no file I/O; the node's paths below are {INVISIBLE}" in text
    assert "NVMe controllers on a kernel-bypass driver: 3 NVMe controller(s) off the kernel's nvme driver" in text


def test_the_trace_result_is_built_with_the_untraced_answer_from_the_classifiers_node(h200):
    """trace/result.py result_of (the live trace's and the replay's one end): the classifier's node
    facts give the summary's untraced; without them (a replay) it is null."""
    from gdsdiag.trace.model.classify import Classifier
    from gdsdiag.trace.model.counted import CountedIo
    from gdsdiag.trace.model.tally import RouteTally
    from gdsdiag.trace.result import result_of

    cf.add_bypassed_nvme(h200)
    clf = Classifier()
    res = result_of(clf, CountedIo(), RouteTally(), attached=[], failed=[], lost=0, events=0)
    assert res.untraced is None and res.summary_json()["untraced"] is None
    clf = Classifier()
    clf.node = _node(h200)
    res = result_of(clf, CountedIo(), RouteTally(), attached=[], failed=[], lost=0, events=0)
    assert res.untraced == untraced_why(clf.node, [])
    assert res.summary_json()["untraced"]["why_chain"][0]["value"].endswith(INVISIBLE)
