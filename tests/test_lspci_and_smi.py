"""lspci and nvidia-smi imports from the real captures in the corpus, and the cell-by-cell
cross-check on the two machines for which the corpus has both the lspci tree and nvidia-smi."""

import pytest
from conftest import corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from gdsdiag.errors import GdsdiagError
from gdsdiag.importers import lspci, nvidia_smi
from gdsdiag.topology.cross_check import cross_check
from gdsdiag.topology.load import from_lspci
from gdsdiag.topology.model import Role
from gdsdiag.topology.pairs import NcclLevel, P2pDmaMap, P2pVerdict, SmiLevel, analyse_all

ASUS_TREE = corpus("lspci-tree", "asus-esc8000a-e12-highpoint-nvme-switch.txt")
ASUS_SMI = corpus("nvidia-smi-topo", "asus-esc8000a-e12-4xrtx6000ada-cx7.txt")
PUGET_TREE = corpus("lspci-tree", "puget-wrx90-highpoint-nvme-switch-2xrtx6000ada.txt")
PUGET_SMI = corpus("nvidia-smi-topo", "puget-wrx90-2xrtx6000ada-phb-cx7.txt")
GIGABYTE = corpus("lspci-tree", "gigabyte-e251-u70-pex8747-cx6dx-v100-same-switch.txt")
N1SDP = corpus("lspci-vvv", "arm-n1sdp-plx-pex8749-acs-redir-on-dsp-lspci-vvxxx.txt")

# lspci -tv carries no NUMA placement. For the 2-socket ASUS box the nvidia-smi capture of the same
# machine gives GPU0 (bus 01) and GPU1 (bus 41) NUMA 0, GPU2 (c1) and GPU3 (e1) NUMA 1; the EPYC 9004
# two-socket layout gives each socket four host bridges, bus 00-7f on socket 0 and 80-ff on socket 1,
# which places the NIC host bridges 20 (socket 0) and 80 (socket 1). Puget WRX90 is one socket.
ASUS_NUMA = "0000:00-7f=0,0000:80-ff=1"


def cells(tree, smi, numa):
    topo = from_lspci([tree], numa)
    pairs = analyse_all(topo)
    return topo, pairs, cross_check(topo, pairs, open(smi).read())


@pytest.mark.parametrize(
    "tree,smi,numa,n", [(ASUS_TREE, ASUS_SMI, ASUS_NUMA, 28), (PUGET_TREE, PUGET_SMI, "0000:00-ff=0", 6)]
)
def test_cross_check_agrees_on_every_cell(tree, smi, numa, n):
    topo, pairs, res = cells(tree, smi, numa)
    assert len(res) == n
    assert [r for r in res if not r["agree"]] == []


def test_cross_check_without_numa_does_not_guess_node():
    # Without the socket split a pair across host bridges is NODE or SYS: gdsdiag says '?' and
    # does not compare it (it used to say NODE, and disagree with every SYS cell). On this box
    # every GPU and NIC has a host bridge of its own, so nothing is left to compare.
    _, _, res = cells(ASUS_TREE, ASUS_SMI, None)
    unknown = [r for r in res if r["gdsdiag"] == "?"]
    assert unknown and all(r["agree"] is None and "--numa" in r["note"] for r in unknown)
    assert {r["nvidia_smi"] for r in unknown} == {"NODE", "SYS"}
    assert not [r for r in res if r["agree"] is False]


def test_asus_tree_structure():
    topo = from_lspci([ASUS_TREE], ASUS_NUMA)
    gpus = {g.label: g for g in topo.by_role(Role.GPU)}
    assert {g: d.bdf for g, d in gpus.items()} == {
        "GPU0": "0000:01:00.0",
        "GPU1": "0000:41:00.0",
        "GPU2": "0000:c1:00.0",
        "GPU3": "0000:e1:00.0",
    }
    assert len(topo.by_role(Role.NVME)) == 17  # 2 carriers x 8 Samsung + 1 boot drive
    assert len([n for n in topo.by_role(Role.NIC) if n.fn.vendor == 0x15B3]) == 4
    nvme = topo.devices["0000:02:00.0"]
    assert nvme.parent.bdf == "0000:00:05.1" and nvme.parent.role == Role.ROOT_PORT
    # HighPoint carrier: uplink switch -> 4 ports -> nested switch -> NVMe
    deep = [d for d in topo.by_role(Role.NVME) if len(d.ancestors()) == 5]
    assert len(deep) == 16


def test_gigabyte_same_switch_is_pix_both_ways():
    topo = from_lspci([GIGABYTE])
    (gpu,) = topo.by_role(Role.GPU)
    pairs = [p for p in analyse_all(topo) if p.b.role == Role.NIC]
    assert len(pairs) == 2
    for p in pairs:
        assert p.smi == SmiLevel.PIX and p.nccl == NcclLevel.PIX
        assert p.path == ["0000:b6:00.0", "0000:b4:10.0", "0000:b3:00.0", "0000:b4:08.0", p.b.bdf]
        # -tv has no ACS: never guess BUS_ADDR
        assert p.p2pdma == P2pDmaMap.UNKNOWN and p.verdict == P2pVerdict.UNKNOWN


def test_n1sdp_pex8749_downstream_ports_redirect():
    fns = lspci.parse_vvv(open(N1SDP).read())
    dsps = [f for f in fns.values() if f.device == 0x8749 and f.port_type and f.port_type.value == "switch_downstream"]
    assert len(dsps) == 6
    for f in dsps:
        a = f.acs_control
        assert a.source_validation and a.request_redirect and a.completion_redirect and a.upstream_forwarding
        assert not a.egress_control and a.redirects
    up = fns["0000:01:00.0"]
    assert up.vendor == 0x10B5 and up.config_size == 256 and up.secondary_bus == 2
    # the root port's hex dump: ARM 13b5:0100, LnkCap Gen3 x16, LnkSta Gen2 x16 (downgraded)
    rp = fns["0000:00:00.0"]
    assert (rp.vendor, rp.device) == (0x13B5, 0x0100)
    assert (rp.link.speed_gts, rp.link.width, rp.link.max_speed_gts, rp.link.max_width) == (5.0, 16, 8.0, 16)
    topo = from_lspci([N1SDP])
    nic = topo.devices["0000:07:00.0"]
    assert [d.bdf for d in nic.ancestors()] == ["0000:02:13.0", "0000:01:00.0", "0000:00:00.0"]


@pytest.mark.parametrize(
    "name,count",
    [("asus-esc8000a-e12-acsctl-grep-all-disabled.txt", 46), ("puget-wrx90-acsctl-grep-all-disabled.txt", 26)],
)
def test_acsctl_greps_all_off(name, count):
    acs = lspci.acsctl_lines(open(corpus("lspci-vvv", name)).read())
    assert len(acs) == count
    assert all(a is not None and not a.redirects and not a.source_validation for a in acs)


def test_gpu_endpoint_block():
    fns = lspci.parse_vvv(open(corpus("lspci-vvv", "asus-esc8000a-e12-gpu0-rtx6000ada-endpoint.txt")).read())
    (gpu,) = fns.values()
    assert gpu.vendor == 0x10DE and gpu.class_code >> 8 == 0x0300
    assert gpu.numa_node == 0
    assert gpu.link.speed_gts == 2.5 and gpu.link.max_speed_gts == 16.0 and gpu.link.width == 16


SMI_EXPECT = {
    "asus-esc8000a-e12-4xrtx6000ada-cx7.txt": (
        8,
        {("GPU0", "GPU1"): "NODE", ("GPU0", "NIC2"): "SYS"},
        {"GPU2": 1},
        {"NIC3": "mlx5_3"},
    ),
    "dgxa100-8xa100-epyc7742-10nic.txt": (
        18,
        {("GPU0", "GPU1"): "NV12", ("GPU0", "NIC0"): "PXB", ("NIC8", "NIC9"): "PIX"},
        {"GPU0": 3},
        {},
    ),
    "gooxi-as4110g-8x4090-after-recabling-nic-netdev-names.txt": (
        10,
        {("GPU0", "GPU4"): "NODE", ("GPU0", "GPU1"): "PIX"},
        {"GPU0": 1},
        {"NIC0": "ibp177s0f0"},
    ),
    "gooxi-as4110g-8x4090-before-recabling-5plus3-split.txt": (10, {}, {}, {}),
    "puget-wrx90-2xrtx6000ada-phb-cx7.txt": (4, {("GPU0", "GPU1"): "PHB"}, {"GPU0": 0}, {}),
    "savio4-8xa5000-pxb-pix-mlx5-oldheader.txt": (
        10,
        {("GPU2", "GPU3"): "PIX", ("GPU0", "GPU2"): "PXB", ("GPU4", "mlx5_0"): "SYS"},
        {"GPU4": 1},
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(SMI_EXPECT))
def test_nvidia_smi_corpus_parses(name):
    ncols, some, numa, legend = SMI_EXPECT[name]
    m = nvidia_smi.parse(open(corpus("nvidia-smi-topo", name)).read())
    assert len(m.columns) == ncols
    assert all(r == c or m.cells[(r, c)] != "X" for (r, c) in m.cells)
    for k, v in some.items():
        assert m.cells[k] == v
    for k, v in numa.items():
        assert m.numa[k] == v
    for k, v in legend.items():
        assert m.nic_legend[k] == v
    assert all(v in nvidia_smi.LEVELS or v.startswith("NV") for v in m.cells.values())


def test_nvidia_smi_gpu_machine_capture_with_ansi():
    import os

    from conftest import FIXTURES

    m = nvidia_smi.parse(open(os.path.join(FIXTURES, "nvidia-smi", "h200-vm-topo-m.txt")).read())
    assert m.columns == ["GPU0"] and m.cells == {("GPU0", "GPU0"): "X"} and m.numa == {"GPU0": 0}


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(GdsdiagError, match="no 'nvidia-smi topo -m' matrix"):
        nvidia_smi.parse("hello")
    empty = tmp_path / "x.txt"
    empty.write_text("nothing here\n")
    with pytest.raises(GdsdiagError, match="no lspci tree or device blocks"):
        from_lspci([str(empty)])
    with pytest.raises(GdsdiagError, match="bad --numa entry"):
        from_lspci([GIGABYTE], "0000:zz=1")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            list("0123456789abcdef:.-+[]|\\ \n\tACSCtlLnkSta+xBusprimay=,")
            + [
                "ReqRedir+",
                "00.0",
                "-[01]--",
                "Express (v2) Root Port",
                "\n00: ff",
                "\n0000:01:00.0 PCI bridge: X\n",
                "-+-[0000:00]-+-",
                "\tBus: primary=00, secondary=01",
            ]
        ),
        max_size=200,
    ).map("".join)
)
def test_fuzz_lspci_parsers(text):
    try:
        lspci.parse_vvv(text)
        lspci.parse_tree(text)
    except GdsdiagError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_smi_parser(text):
    try:
        nvidia_smi.parse("        GPU0\tNIC0\tCPU Affinity\n" + text)
    except GdsdiagError:
        pass
