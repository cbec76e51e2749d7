"""HGX-class fixture: the DGX-2H PCIe tree from hwloc's real XML export, written as a sysfs tree with
binary config space (tests/hgx_fixture.py says where each value comes from)."""

import collections

import pytest
from hgx_fixture import build_dgx2h

from gdsdiag.pci.records import CpuInfo, HostBridge, IommuInfo, PciFunction
from gdsdiag.topology.build import bcm_switch_gen, build
from gdsdiag.topology.findings import find
from gdsdiag.topology.load import from_root
from gdsdiag.topology.model import Role
from gdsdiag.topology.pairs import NcclLevel, P2pDmaMap, P2pVerdict, SmiLevel, analyse_all, analyse_pair


@pytest.fixture(scope="module", params=[False, True], ids=["acs-off", "acs-redirect-iommu-on"])
def dgx2h(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("dgx2h")
    made = build_dgx2h(str(d), acs_redirect=request.param)
    topo = from_root(str(d))
    return request.param, made, topo, analyse_all(topo)


def _pair(pairs, a, b):
    return next(p for p in pairs if p.a.bdf == a and p.b.bdf == b)


def test_tree_is_the_capture(dgx2h):
    _, made, topo, _ = dgx2h
    assert set(topo.devices) == set(made)
    for bdf, facts in made.items():
        d = topo.devices[bdf]
        assert (d.parent.bdf if d.parent else None) == facts["parent"]
        assert topo.numa_of(d) == facts["numa"]
    gpus = topo.by_role(Role.GPU)
    assert len(gpus) == 16 and len(topo.by_role(Role.NVSWITCH)) == 11
    assert collections.Counter(topo.numa_of(g) for g in gpus) == {0: 8, 1: 8}
    assert all(g.fn.link.describe() == "Gen3 x16 (max Gen3 x16)" for g in gpus)
    rp = topo.devices["0000:2b:00.0"]
    assert rp.role == Role.ROOT_PORT and rp.fn.config.pcie is not None and rp.fn.acs_known
    assert topo.devices["0000:2c:00.0"].role == Role.SWITCH_UPSTREAM
    assert topo.devices["0000:2d:04.0"].role == Role.SWITCH_DOWNSTREAM


def test_levels(dgx2h):
    acs, _, topo, pairs = dgx2h
    same_inner = _pair(pairs, "0000:34:00.0", "0000:36:00.0")  # both below PEX9781 32:00.0
    assert (same_inner.smi, same_inner.nccl) == (SmiLevel.PIX, NcclLevel.PIX)
    assert same_inner.path == ["0000:34:00.0", "0000:33:00.0", "0000:32:00.0", "0000:33:10.0", "0000:36:00.0"]
    outer = [p for p in pairs if p.a.bdf == "0000:34:00.0" and p.smi == SmiLevel.PXB]
    assert outer and all(p.nccl == NcclLevel.PXB for p in outer)  # via the outer switch 2c:00.0
    counts = collections.Counter(p.smi for p in pairs)
    assert counts == {SmiLevel.SYS: 128, SmiLevel.NODE: 64, SmiLevel.PXB: 32, SmiLevel.PIX: 16}
    assert all(p.nccl == NcclLevel.PHB for p in pairs if p.smi == SmiLevel.NODE)  # NCCL has no NODE
    assert all(abs(p.narrowest.link.gbytes_per_s - 15.753846) < 1e-5 for p in pairs)


def test_p2p_verdicts(dgx2h):
    acs, _, topo, pairs = dgx2h
    same_inner = _pair(pairs, "0000:34:00.0", "0000:36:00.0")
    cross_rp = [p for p in pairs if p.smi == SmiLevel.NODE]
    # Skylake-E root ports (8086:2030) are on p2pdma.c's whitelist without REQ_SAME_HOST_BRIDGE
    assert all(p.p2pdma == P2pDmaMap.THRU_HOST_BRIDGE for p in cross_rp)
    ids = {f.id for f in find(topo, pairs)}
    if not acs:
        assert same_inner.p2pdma == P2pDmaMap.BUS_ADDR and same_inner.verdict == P2pVerdict.P2P
        assert all(p.verdict == P2pVerdict.VIA_HOST for p in cross_rp)
        assert topo.iommu.mode == "off" and "acs-redirect" not in ids
    else:
        assert same_inner.p2pdma == P2pDmaMap.THRU_HOST_BRIDGE
        assert same_inner.acs_redirect_bridges == ["0000:33:00.0", "0000:33:10.0"]
        # two GPUs and no NVLink source (a DGX-2H joins all 16 by NVSwitch): "no P2P" is not known
        # from the PCIe path alone (issue 22); the PCIe reasons stay
        assert same_inner.verdict == P2pVerdict.UNKNOWN and same_inner.nvlink_unknown
        assert "the PCIe verdict (NO_P2P) does not decide GPU P2P" in same_inner.reasons[0]
        assert any("IOMMU translating" in r for r in same_inner.reasons)
        assert topo.iommu.mode == "translated" and {"acs-redirect", "iommu-translating"} <= ids


def _fn(bdf, parent, cls, ven, dev, sv=0, sd=0):
    return PciFunction(
        bdf=bdf,
        host_bridge="0000:00",
        parent_bdf=parent,
        class_code=cls,
        vendor=ven,
        device=dev,
        subsystem_vendor=sv,
        subsystem_device=sd,
    )


def test_broadcom_two_level_switch_is_flattened_like_nccl():
    # IDs as NCCL's getBcmGen (src/graph/topo.cc) matches them: PEX Gen4 1000:c010 sub 1000:a0xx
    fns = [
        _fn("0000:00:01.0", None, 0x060400, 0x8086, 0x2030),
        _fn("0000:01:00.0", "0000:00:01.0", 0x060400, 0x1000, 0xC010, 0x1000, 0xA064),
        _fn("0000:02:00.0", "0000:01:00.0", 0x060400, 0x1000, 0xC010, 0x1000, 0xA064),
        _fn("0000:03:00.0", "0000:02:00.0", 0x060400, 0x1000, 0xC010, 0x1000, 0xA064),
        _fn("0000:04:00.0", "0000:03:00.0", 0x060400, 0x1000, 0xC010, 0x1000, 0xA064),
        _fn("0000:04:01.0", "0000:03:00.0", 0x060400, 0x1000, 0xC010, 0x1000, 0xA064),
        _fn("0000:05:00.0", "0000:04:00.0", 0x030200, 0x10DE, 0x20B0),
        _fn("0000:06:00.0", "0000:04:01.0", 0x020700, 0x15B3, 0x101B),
        _fn("0000:02:01.0", "0000:01:00.0", 0x060400, 0x1000, 0xC010, 0x1000, 0xA064),
        _fn("0000:07:00.0", "0000:02:01.0", 0x010802, 0x144D, 0xA824),
    ]
    assert bcm_switch_gen(fns[1], 0) == 4
    topo = build(fns, {"0000:00": HostBridge("0000:00", 0)}, IommuInfo(mode="off"), CpuInfo())
    assert topo.devices["0000:03:00.0"].switch_id == "0000:01:00.0"
    gpu, nic, nvme = (topo.devices[b] for b in ("0000:05:00.0", "0000:06:00.0", "0000:07:00.0"))
    p = analyse_pair(topo, gpu, nic)
    assert p.nccl == NcclLevel.PIX and p.smi == SmiLevel.PIX
    assert analyse_pair(topo, gpu, nvme).nccl == NcclLevel.PIX
    # the same tree with a non-Broadcom inner switch stays two switches deep
    fns[3].vendor = 0x10B5
    topo2 = build(fns, {"0000:00": HostBridge("0000:00", 0)}, IommuInfo(mode="off"), CpuInfo())
    p2 = analyse_pair(topo2, topo2.devices["0000:05:00.0"], topo2.devices["0000:07:00.0"])
    assert p2.nccl == NcclLevel.PXB and p2.smi == SmiLevel.PXB
