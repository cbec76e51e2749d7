"""Issue 12, topology side: NVLink, nvidia-smi parsing and cross-check, presentation. Real inputs only:

- tests/fixtures/snapshots/h200x2-vm-snapshot-2026-11-30.tar.gz and tests/fixtures/nvidia-smi/
  h200x2-vm-topo-m.txt: the two-GPU GPU machine (2x H200, NV18) as gdsdiag snapshot captured it and
  nvidia-smi printed it (ANSI underline kept). Before: GPU0↔GPU1 'PHB!' with no P2P, a P2PDMA warning
  for the pair, and '--cross-check' counting the two NV18 cells as agreeing.
- corpus/nvidia-smi-topo/gb200-4gpu-8nic-gpu-numa-id.txt: a GB200 box's matrix with comma-list NUMA
  affinities and GPU NUMA IDs. Before: NUMA None and the GPU NUMA ID column dropped.
- corpus/nvidia-smi-topo/puget-wrx90-2xrtx6000ada-phb-cx7.txt (NIC0/NIC1 = mlx5_0/mlx5_1) against the
  H200 machine whose only NIC is a virtio eth0: nothing may be matched by position.
"""

import json
import os
import subprocess

from conftest import FIXTURES, GDSDIAG, corpus

from gdsdiag.importers import nvidia_smi
from gdsdiag.topology.cross_check import cross_check, summary
from gdsdiag.topology.findings import find
from gdsdiag.topology.load import attach_smi_text, from_root
from gdsdiag.topology.pairs import P2pVerdict, SmiLevel, analyse_all

H200X2 = os.path.join(FIXTURES, "snapshots", "h200x2-vm-snapshot-2026-11-30.tar.gz")
H200X2_SMI = os.path.join(FIXTURES, "nvidia-smi", "h200x2-vm-topo-m.txt")
GB200_SMI = corpus("nvidia-smi-topo", "gb200-4gpu-8nic-gpu-numa-id.txt")
PUGET_SMI = corpus("nvidia-smi-topo", "puget-wrx90-2xrtx6000ada-phb-cx7.txt")


def cli(*args):
    return subprocess.run([*GDSDIAG, *args], capture_output=True, text=True)


def test_gb200_numa_affinity_lists_and_gpu_numa_id():
    m = nvidia_smi.parse(open(GB200_SMI).read())
    assert m.numa == {"GPU0": 0, "GPU1": 0, "GPU2": 1, "GPU3": 1}
    assert m.numa_affinity["GPU0"] == [0] + list(range(3, 10)) + list(range(11, 18))
    assert m.numa_affinity["GPU2"] == [1] + list(range(19, 26)) + list(range(27, 34))
    assert m.gpu_numa_id == {"GPU0": 2, "GPU1": 10, "GPU2": 18, "GPU3": 26}
    assert m.cpu_affinity["GPU3"] == "72-143"
    assert m.cells[("GPU0", "GPU3")] == "NV18" and m.cells[("GPU2", "NIC5")] == "SYS"
    assert m.nic_legend["NIC7"] == "mlx5_7"
    # the two-GPU machine: tabs, ANSI underline, an empty cell before 'N/A'
    h = nvidia_smi.parse(open(H200X2_SMI).read())
    assert h.numa == {"GPU0": 0, "GPU1": 0} and h.gpu_numa_id == {"GPU0": None, "GPU1": None}
    assert h.cells[("GPU0", "GPU1")] == "NV18"


def _h200x2(tmp_path, with_smi=True):
    # opened the way every command opens a snapshot (no tarfile filter needed: Python 3.11.2 lacks it)
    from gdsdiag.platform.roots import node_root

    with node_root(snapshot=H200X2) as fs:
        topo = from_root(fs)
    if with_smi:
        attach_smi_text(topo, open(H200X2_SMI).read(), "nvidia-smi topo -m text (h200x2)")
    return topo


def test_nvlink_pair_is_p2p_over_nvlink_not_phb(tmp_path):
    topo = _h200x2(tmp_path)
    pairs = analyse_all(topo)
    (gg,) = [p for p in pairs if p.a.label == "GPU0" and p.b.label == "GPU1"]
    assert gg.label == "NV18" and gg.nvlink.links == 18
    assert gg.verdict == P2pVerdict.NVLINK
    assert gg.smi == SmiLevel.PHB  # the PCIe level is still known and reported
    assert gg.reasons[0].startswith("NV18: 18 NVLink(s)")
    doc = gg.to_json()
    assert doc["nvidia_smi"] == "NV18" and doc["pcie"] == "PHB" and doc["p2p"] == "P2P_NVLINK"
    # the P2PDMA warning may name GPU↔NIC pairs, never the NVLink-joined GPUs
    for f in find(topo, pairs):
        if f.id == "p2pdma-not-supported":
            assert "GPU1 (0000:00:07.0)↔GPU0" not in f.evidence and "GPU0 (0000:00:06.0)↔GPU1" not in f.evidence


def test_snapshot_without_nvlink_source_says_so_and_cross_check_does_not_count_it(tmp_path):
    topo = _h200x2(tmp_path, with_smi=False)
    assert topo.nvlink is None and "no NVLink source" in topo.nvlink_note
    pairs = analyse_all(topo)
    res = cross_check(topo, pairs, open(H200X2_SMI).read())
    assert len(res) == 2
    assert all(r["agree"] is None and r["note"].startswith("not compared: NVLink cell") for r in res)
    assert summary(res).endswith("0 agree, 0 disagree, 2 not compared")


def test_cross_check_never_matches_a_nic_by_position(tmp_path):
    topo = _h200x2(tmp_path)
    assert [d.label for d in topo.by_role(__import__("gdsdiag.topology.model", fromlist=["Role"]).Role.NIC)] == ["eth0"]
    res = cross_check(topo, analyse_all(topo), open(PUGET_SMI).read())
    nic = [r for r in res if r["column"].startswith("NIC")]
    assert len(nic) == 4
    # Puget's text names mlx5 NICs, this node has only eth0: the text is another node's, so no
    # cell is compared at all (not even the GPU pair, whose indices need not name the same cards)
    assert all(r["agree"] is None and "none of its NICs (mlx5_0, mlx5_1...) is on this node" in r["note"] for r in res)
    assert not any(r.get("b") == "0000:00:03.0" for r in res)


def test_cli_cross_check_json_and_exit(tmp_path):
    r = cli("topology", "--from", H200X2, "--nvidia-smi", H200X2_SMI, "--json")
    doc = json.loads(r.stdout)
    (gg,) = [p for p in doc["pairs"] if p["a_label"] == "GPU0" and p["b_label"] == "GPU1"]
    assert gg["nvidia_smi"] == "NV18" and gg["p2p"] == "P2P_NVLINK"
    assert doc["nvlink"]["pairs"][0]["links"] == 18
    # the NVLink came from the same text: not an independent comparison
    assert [c["agree"] for c in doc["cross_check"]] == [None, None]
    # no cell was compared, only the two GPUs' NUMA nodes (sysfs vs the text): exit 1, not 0
    assert doc["cross_check_input"]["compared"] == 0 and r.returncode == 1
    assert [x["agree"] for x in doc["cross_check_input"]["numa"]] == [True, True]


def test_cli_presentation_parts_and_pipe(tmp_path):
    full = cli("topology", "--from", H200X2, "--nvidia-smi", H200X2_SMI).stdout
    lines = full.splitlines()
    header = next(ln for ln in lines if "GPU0" in ln and "NIC0" in ln)
    assert header.split() == ["GPU0", "GPU1", "NIC0", "CPU", "Affinity", "NUMA", "Affinity"]
    row = next(ln for ln in lines if ln.split()[:2] == ["GPU0", "X"])
    assert row.split() == ["GPU0", "X", "NV18", "PHB!", "0-31", "0"]
    assert "  NIC0: eth0 (0000:00:03.0)" in lines
    assert (
        "Legend:" in lines
        and "  NV#  = Connection traversing a bonded set of # NVLinks (GPU peer traffic goes over NVLink)" in lines
    )
    # every fix is one line in a pipe
    fixes = [ln for ln in lines if ln.strip().startswith("fix: ")]
    assert fixes and all(ln.rstrip().endswith(("still", "complex")) for ln in fixes)
    assert "findings (" in full
    tree_only = cli("topology", "--from", H200X2, "--tree").stdout
    assert "host bridge 0000:00" in tree_only and "pair matrix" not in tree_only and "findings" not in tree_only
    matrix_only = cli("topology", "--from", H200X2, "--matrix").stdout
    assert "pair matrix" in matrix_only and "host bridge" not in matrix_only and "findings" not in matrix_only
    assert "NVLink:" in matrix_only  # no NVLink source in a bare snapshot: said, not silent
    findings_only = cli("topology", "--from", H200X2, "--findings").stdout
    assert (
        findings_only.startswith("findings (")
        and "GPU0   X" not in findings_only
        and "host bridge" not in findings_only
    )
    both = cli("topology", "--from", H200X2, "--tree", "--findings").stdout
    assert "host bridge" in both and "findings (" in both and "CPU Affinity" not in both


def test_gpu_machine_nvlink_status_text_all_links_active(tmp_path):
    # the same machine's 'nvidia-smi nvlink -s' (18 links x 26.562 GB/s per GPU): no inactive-link finding
    from gdsdiag.topology.load import attach_nvlink_status

    topo = _h200x2(tmp_path)
    attach_nvlink_status(topo, open(os.path.join(FIXTURES, "nvidia-smi", "h200x2-vm-nvlink-s.txt")).read(), "nvlink -s")
    assert sorted((g.links_active, g.links_inactive) for g in topo.nvlink.gpus.values()) == [(18, 0), (18, 0)]
    assert not any(f.id.startswith("nvlink-inactive") for f in find(topo, analyse_all(topo)))


def test_dynamic_routing_on_a_real_dgx_a100_matrix():
    # corpus/nvidia-smi-topo/dgxa100-8xa100-epyc7742-10nic.txt: NV12 all-to-all, NIC0/NIC1 PXB to GPU0/GPU1
    # only. Any other GPU reaching mlx5_0 crosses the root complex, and GPU0 (near mlx5_0, NV12 to it)
    # is the GPU_MEM_NVLINKS bounce cufile.json's dynamic routing would use.
    from gdsdiag.topology.routing import describe, plan

    m = nvidia_smi.parse(open(corpus("nvidia-smi-topo", "dgxa100-8xa100-epyc7742-10nic.txt")).read())
    gpus = [c for c in m.columns if c.startswith("GPU")]
    nics = [c for c in m.columns if c.startswith("NIC")]

    def cell(a, b):
        return m.cells.get((a, b))

    def nv(a, b):
        return cell(a, b) if (cell(a, b) or "").startswith("NV") else None

    entries = plan(gpus, nics, cell, nv)
    by = {(e["gpu"], e["nic"]): e for e in entries}
    e = by[("GPU5", "NIC0")]
    assert (e["direct"], e["policy"], e["via_gpu"], e["link"]) == ("SYS", "GPU_MEM_NVLINKS", "GPU0", "NV12")
    assert ("GPU0", "NIC0") not in by and ("GPU1", "NIC1") not in by
    # NIC8/NIC9 share a switch with no GPU: host memory is all cuFile has
    assert {by[(g, "NIC8")]["policy"] for g in gpus} == {"SYS_MEM"}
    assert describe(e).startswith(
        "GPU5 ↔ NIC0 is SYS (crosses the root complex): GPU_MEM_NVLINKS can bounce through GPU0"
    )


def test_dynamic_routing_on_the_asus_tree_is_sys_mem_only():
    # corpus lspci tree of the ASUS ESC8000A-E12: each GPU alone on a root port, the ConnectX-7s on other
    # host bridges -> no GPU shares a switch with a NIC
    from gdsdiag.topology.load import from_lspci
    from gdsdiag.topology.routing import dynamic_routing

    topo = from_lspci(
        [corpus("lspci-tree", "asus-esc8000a-e12-highpoint-nvme-switch.txt")], "0000:00-7f=0,0000:80-ff=1"
    )
    r = dynamic_routing(topo, analyse_all(topo))
    assert len(r) == 4 * 4 and {e["policy"] for e in r} == {"SYS_MEM"}


def test_nvlinked_gpus_without_an_nvlink_source_are_unknown_not_no_p2p():
    """The H200x2 snapshot alone has no NVLink source (NVML is live-only): the two GPUs, NV18-joined
    on the real machine, must read '?' (unknown), not 'PHB!' (no P2P). With the node's nvidia-smi
    text they read NV18. The GPU↔virtio NIC pair keeps its PCIe verdict."""
    plain = cli("topology", "--from", H200X2, "--matrix").stdout.splitlines()
    row = next(ln for ln in plain if ln.split()[:2] == ["GPU0", "X"])
    assert row.split()[:4] == ["GPU0", "X", "?", "PHB!"]
    doc = json.loads(cli("topology", "--from", H200X2, "--json").stdout)
    (gg,) = [p for p in doc["pairs"] if p["a_label"] == "GPU0" and p["b_label"] == "GPU1"]
    assert gg["p2p"] == "UNKNOWN" and gg["reasons"][0].startswith("no NVLink source")
    joined = cli("topology", "--from", H200X2, "--nvidia-smi", H200X2_SMI, "--matrix").stdout.splitlines()
    assert next(ln for ln in joined if ln.split()[:2] == ["GPU0", "X"]).split()[2] == "NV18"
