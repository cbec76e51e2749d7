"""nvidia-smi topo -m as wide matrices really print it: fields glued with no space between them
(a header 'NIC7NIC8', cells 'SYSSYS', 'NODEPIX', ' X PIX'), read by the cell vocabulary rather
than by whitespace; every line not read is named; exit codes follow what was compared. Each
capture names its source in its first line (tests/fixtures/corpus/nvidia-smi-topo/)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import CORPUS, GDSDIAG

from gdsdiag.importers import nvidia_smi

NCCL311 = os.path.join(CORPUS, "nvidia-smi-topo", "nccl-tests311-8xa100-10nic-glued-nic7nic8.txt")
SGLANG = os.path.join(CORPUS, "nvidia-smi-topo", "sglang14092-8xh20-36nic-glued-cells.txt")
ASUS_TREE = os.path.join(CORPUS, "lspci-tree", "asus-esc8000a-e12-highpoint-nvme-switch.txt")
ASUS_SMI = os.path.join(CORPUS, "nvidia-smi-topo", "asus-esc8000a-e12-4xrtx6000ada-cx7.txt")


def cli(*args):
    return subprocess.run([*GDSDIAG, *args], capture_output=True, text=True, timeout=300)


def capture(path: str) -> str:
    """What was captured: the corpus file less its three '#' lines (source, machine, date)."""
    return "".join(open(path).readlines()[3:])


def _square_and_symmetric(m):
    # topo -m is symmetric with X on the diagonal: one shifted cell anywhere breaks both (a matrix
    # trimmed to its first columns, as NVIDIA's guide prints one, is checked where both cells exist)
    for r in m.columns:
        assert m.cells[(r, r)] == "X", r
    for (r, c), v in m.cells.items():
        assert m.cells.get((c, r), v) == v, (r, c)


def test_glued_header_and_cells_nccl_tests_311():
    m = nvidia_smi.parse(capture(NCCL311))
    assert m.columns == [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(10)]
    _square_and_symmetric(m)
    assert m.cells[("GPU6", "NIC7")] == "PXB" and m.cells[("GPU6", "NIC8")] == "SYS"
    assert m.cells[("NIC8", "NIC9")] == "PIX" and m.cells[("NIC7", "NIC6")] == "PIX"
    assert m.numa == {"GPU0": 3, "GPU1": 3, "GPU2": 1, "GPU3": 1, "GPU4": 7, "GPU5": 7, "GPU6": 5, "GPU7": 5}
    assert m.cpu_affinity["GPU4"] == "56-63,120-127" and m.gpu_numa_id["GPU0"] is None
    assert "header: NIC7NIC8" in m.split_glued and "GPU6: PXBSYS" in m.split_glued
    assert m.unread == []


def test_glued_cells_36_nics_sglang_14092():
    m = nvidia_smi.parse(capture(SGLANG))
    assert len(m.columns) == 44 and m.columns[-1] == "NIC35"
    _square_and_symmetric(m)
    assert m.cells[("GPU0", "NIC34")] == "NODE" and m.cells[("GPU0", "NIC35")] == "PIX"
    assert m.cells[("GPU2", "NIC12")] == "PIX" and m.cells[("GPU2", "NIC13")] == "PIX"
    assert m.cells[("GPU4", "NIC32")] == "PIX" and m.cells[("GPU4", "NIC35")] == "SYS"
    # the affinity cells after a glued last pair are read as affinity, not as a NIC label
    assert m.cpu_affinity["GPU0"] == "0-55,112-167" and m.cpu_affinity["GPU7"] == "70-99,102-107"
    assert m.numa == {f"GPU{i}": 0 if i < 4 else 1 for i in range(8)}
    assert m.nic_legend["NIC35"] == "mlx5_bond_3"
    # sglang's own lines around the matrix are named, not dropped
    assert [u.split(":", 2)[0] for u in m.unread] == ["line 1", "line 98"]
    assert "NVIDIA Topology:" in m.unread[0] and "ulimit soft: 655350" in m.unread[1]


def test_the_corpus_captures_read_whole():
    for name in sorted(os.listdir(os.path.join(CORPUS, "nvidia-smi-topo"))):
        m = nvidia_smi.parse(capture(os.path.join(CORPUS, "nvidia-smi-topo", name)))
        _square_and_symmetric(m)
        assert not m.rows_unread, (name, m.unread)
        # every line of every capture is read, but sglang's two lines of its own around the matrix
        assert len(m.unread) == (2 if name.startswith("sglang") else 0), (name, m.unread)


def test_nodelist_range_is_bounded():
    assert nvidia_smi._nodelist("0,3-9,11-17") == [0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17]
    with pytest.raises(ValueError, match="not expanded"):
        nvidia_smi._nodelist("0-4000000000")
    with pytest.raises(ValueError, match="backwards"):
        nvidia_smi._nodelist("9-3")
    text = capture(ASUS_SMI).replace("0-31    0 ", "0-31    0-4000000000 ", 1)
    m = nvidia_smi.parse(text)
    assert m.numa["GPU0"] is None and any("0-4000000000" in u and "not expanded" in u for u in m.unread)


def test_an_unknown_cell_is_unknown_and_a_short_row_is_not_read():
    # one cell of GPU1's row turned into a word nvidia-smi never prints: that cell is '?', the
    # others stay in place; a row missing a cell is not guessed at (its CPU list is not a cell)
    text = capture(ASUS_SMI).replace("GPU1    NODE     X      SYS", "GPU1    NODE     X      BOGUS", 1)
    m = nvidia_smi.parse(text)
    assert m.cells[("GPU1", "GPU2")] == "?" and m.cells[("GPU1", "GPU3")] == "SYS"
    assert m.cpu_affinity["GPU1"] == "0-31"
    assert "row GPU1, column GPU2: cell 'BOGUS' is of no known kind" in m.unread[0]
    short = capture(ASUS_SMI).replace("GPU1    NODE     X      SYS", "GPU1    NODE     X", 1)
    m = nvidia_smi.parse(short)
    assert m.rows_unread == ["GPU1"] and "7 cells for 8 columns" in m.unread[0]


def test_cli_glued_text_from_another_node_is_exit_3_and_says_so():
    # the 4-GPU ASUS tree against the 8-GPU H20 node's text: never compared, one line says why
    args = ("topology", "--lspci", ASUS_TREE, "--numa", "0000:00-7f=0,0000:80-ff=1", "--nvidia-smi", SGLANG)
    r = cli(*args, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 3
    assert doc["cross_check_input"]["compared"] == 0
    assert doc["cross_check_input"]["other_node"][0] == "it lists 8 GPUs, this node has 4"
    text = cli(*args).stdout
    assert "not this node's" in text and "nothing was compared" in text
    assert "not read: line 4: before the matrix, not read: 'NVIDIA Topology:'" in text  # sglang's own line


def test_cli_same_node_agreement_is_exit_0_only_when_every_cell_compared():
    r = cli("topology", "--lspci", ASUS_TREE, "--numa", "0000:00-7f=0,0000:80-ff=1", "--nvidia-smi", ASUS_SMI, "--json")
    doc = json.loads(r.stdout)
    assert doc["cross_check_input"]["not_compared"] == 0 and doc["cross_check_input"]["compared"] == 28
    # the corpus file's three '#' lines on top are comments; every line of the capture was read
    assert doc["cross_check_input"]["unread"] == []
    assert r.returncode == max([0] + [{"info": 0, "warn": 1, "fail": 2}[f["severity"]] for f in doc["findings"]])


# --- pastes judged on their own: 'lspci -vvv | grep ACSCtl' and 'nvidia-smi nvlink -s' ---

NCCL629_GREP = os.path.join(CORPUS, "lspci-vvv", "nccl-629-acsctl-grep-mixed-redirect.txt")
PUGET_GREP = os.path.join(CORPUS, "lspci-vvv", "puget-wrx90-acsctl-grep-all-disabled.txt")
AZHPC_NVLINK = os.path.join(CORPUS, "nvidia-smi-nvlink", "azhpc-v100-sxm2-two-links-inactive.txt")


def test_bare_acsctl_grep_with_redirect_is_a_warning():
    r = cli("topology", "--lspci", NCCL629_GREP, "--json")
    doc = json.loads(r.stdout)
    (f,) = [f for f in doc["findings"] if f["id"] == "acs-grep-redirect"]
    assert f["severity"] == "warn" and f["title"].startswith("ACS redirect on 4 of 15 ACS-capable ports")
    assert r.returncode == 1


def test_bare_acsctl_grep_all_off_is_judged_clear():
    r = cli("topology", "--lspci", PUGET_GREP, "--json")
    doc = json.loads(r.stdout)
    assert [f["title"] for f in doc["findings"] if f["id"] == "acs-grep-clear"] == [
        "no ACS redirect on any of the 26 ACS-capable ports"
    ]
    assert r.returncode == 0


def test_lspci_lines_not_read_are_named(tmp_path):
    # a real tree with a real line of another tool pasted under it (the first gdscheck line of the
    # ASUS box's capture): that line is named, the tree still read
    text = open(os.path.join(CORPUS, "lspci-tree", "gigabyte-e251-u70-pex8747-cx6dx-v100-same-switch.txt")).read()
    other = capture(os.path.join(CORPUS, "gdscheck", "asus-esc8000a-e12-gds1.14-iommu-off.txt")).splitlines()
    line = next(ln for ln in other if ln.strip())
    p = tmp_path / "t.txt"
    p.write_text(text + line + "\n")
    doc = json.loads(cli("topology", "--lspci", str(p), "--json").stdout)
    probs = [f["title"] for f in doc["findings"] if f["id"] == "read-problem"]
    assert any(f"not read: {line.strip()[:120]!r}" in t for t in probs), probs
    assert any(d["role"] == "gpu" for d in doc["devices"])


def test_nvlink_status_alone_is_judged():
    # Azure/azhpc-diagnostics#73: GPU 3 with links 3 and 5 down, the text alone (no node to place it)
    # (read against the one-GPU H200 snapshot, which has no GPU 3 and no NVLink source of its own,
    # so the result is the same on any machine)
    h200 = os.path.join(os.path.dirname(CORPUS), "snapshots", "h200-vm-2026-11-29.tar.gz")
    r = cli("topology", "--from", h200, "--nvidia-smi", AZHPC_NVLINK, "--json")
    doc = json.loads(r.stdout)
    (f,) = [f for f in doc["findings"] if f["id"].startswith("nvlink-inactive")]
    assert f["severity"] == "warn" and "2 NVLink(s) inactive, 4 active" in f["title"]
    assert "cross_check" not in doc and r.returncode == 1


def test_flush_left_trimmed_matrix_from_nvidia_configuration_guide():
    """NVIDIA's guide shows a DGX-2's 'topo -mp' with the leading whitespace lost and only 8 columns
    for 20 rows: the header is still found, rows past the columns still read, every line known."""
    m = nvidia_smi.parse(
        capture(os.path.join(CORPUS, "nvidia-smi-topo", "nvidia-config-guide-dgx2-topo-mp-first-8-columns.txt"))
    )
    assert m.columns == [f"GPU{i}" for i in range(8)]
    assert m.cells[("mlx5_1", "GPU2")] == "PIX" and m.cells[("GPU12", "GPU0")] == "SYS" and len(m.cells) == 160
    assert m.unread == []


def test_inactive_links_the_matrix_accounts_for_are_not_called_broken():
    """A GPU whose NV# links to its peers add up to its active links: the inactive ones join no peer
    (unused by design on boards that leave links unwired), so the finding is info, not 'needs
    servicing'. With NVSwitch links (the peers' count says nothing about each link) it stays warn."""
    from gdsdiag.pci.nvlink import NvLinkGpu, NvLinkInfo, NvLinkPair
    from gdsdiag.platform.roots import node_root
    from gdsdiag.topology.findings import find
    from gdsdiag.topology.load import from_root
    from gdsdiag.topology.model import Role
    from gdsdiag.topology.pairs import analyse_all

    h200x2 = os.path.join(os.path.dirname(CORPUS), "snapshots", "h200x2-vm-snapshot-2026-11-30.tar.gz")
    with node_root(snapshot=h200x2) as fs:
        topo = from_root(fs)
    a, b = sorted(d.bdf for d in topo.by_role(Role.GPU))
    for via_switch, severity in ((False, "info"), (True, "warn")):
        info = NvLinkInfo(source="test")
        info.add(NvLinkPair(a, b, 4, via_nvswitch=via_switch, source="test"))
        info.gpus[a] = NvLinkGpu(a, links_active=4, links_inactive=2)
        topo.nvlink = info
        (f,) = [f for f in find(topo, analyse_all(topo)) if f.id == f"nvlink-inactive:{a}"]
        assert f.severity == severity, via_switch


def test_a_hostile_header_stays_linear_and_its_report_small():
    header = "        GPU0\t" + "\t".join(f"foo{i}" for i in range(20000)) + "\n"
    row = "GPU0\t X \t" + "\t".join("SYS" for _ in range(20000)) + "\n"
    m = nvidia_smi.parse(header + row)
    assert len(m.columns) == 20001 and len(m.unread) == nvidia_smi.MAX_UNREAD + 1
    assert m.unread[-1] == "19950 more lines or cells not read"
    m = nvidia_smi.parse("        GPU0\tNIC0\tCPU Affinity\nGPU0 X SYS " + "0-4000000000," * 1000 + "\n")
    assert len(m.unread) == 1 and len(m.unread[0]) < 200


def test_numa_affinity_is_compared_per_gpu_row():
    args = ["topology", "--lspci", ASUS_TREE, "--nvidia-smi", ASUS_SMI, "--json"]
    good = json.loads(cli(*args[:3], "--numa", "0000:00-7f=0,0000:80-ff=1", *args[3:]).stdout)["cross_check_input"]
    assert [r["agree"] for r in good["numa"]] == [True] * 4
    # the sockets swapped in --numa: every GPU row disagrees (exit 1), the text is still this node's
    r = cli(*args[:3], "--numa", "0000:00-7f=1,0000:80-ff=0", *args[3:])
    bad = json.loads(r.stdout)["cross_check_input"]
    assert [x["agree"] for x in bad["numa"]] == [False] * 4 and bad["other_node"] == [] and r.returncode == 1
    # no --numa: gdsdiag does not know, nothing is claimed
    none = json.loads(cli(*args).stdout)["cross_check_input"]
    assert all(x["agree"] is None and x["gdsdiag"] is None for x in none["numa"])


def test_every_corpus_lspci_capture_is_read_whole():
    """No line of a real lspci capture is reported as not read (tree, -vvv with hex dumps, grep, plain)."""
    import glob

    for path in sorted(glob.glob(os.path.join(CORPUS, "lspci-*", "*.txt"))):
        doc = json.loads(cli("topology", "--lspci", path, "--json").stdout)
        unread = [f["title"] for f in doc["findings"] if "not read" in f["title"]]
        assert not unread, (path, unread[:3])
