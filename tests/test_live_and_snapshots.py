"""Real sysfs: this machine's, and the GPU machine's snapshot taken there with 'gdsdiag snapshot'."""

import os

import pytest
from conftest import FIXTURES

from gdsdiag.platform import pci_sysfs
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.platform.roots import open_snapshot
from gdsdiag.snapshot import create
from gdsdiag.topology.load import from_root
from gdsdiag.topology.model import Role
from gdsdiag.topology.pairs import NcclLevel, P2pDmaMap, P2pVerdict, SmiLevel, analyse_all

H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")


def test_this_machine_live_sysfs():
    if not os.path.isdir("/sys/bus/pci/devices"):
        pytest.skip("no /sys/bus/pci on this machine")
    topo = from_root("/")
    live = sorted(os.listdir("/sys/bus/pci/devices"))
    assert sorted(topo.devices) == live
    for bdf, d in topo.devices.items():
        with open(f"/sys/bus/pci/devices/{bdf}/class") as f:
            assert d.fn.class_code == int(f.read(), 16)
        with open(f"/sys/bus/pci/devices/{bdf}/vendor") as f:
            assert d.fn.vendor == int(f.read(), 16)
    # names come from the class links: every netdev backed by PCI is attached to its function
    for n in os.listdir("/sys/class/net"):
        real = os.path.realpath(f"/sys/class/net/{n}/device") if os.path.exists(f"/sys/class/net/{n}/device") else ""
        bdfs = [c for c in real.split("/") if pci_sysfs.BDF_RE.match(c)]
        if bdfs:
            assert n in topo.devices[bdfs[-1]].names
    pairs = analyse_all(topo)
    assert len(pairs) == len(topo.by_role(Role.GPU)) * (
        len(topo.by_role(Role.GPU)) - 1 + len(topo.by_role(Role.NVME, Role.NIC))
    )


def test_h200_gpu_machine_snapshot():
    """Captured on the GPU machine (1x H200 VM) by 'gdsdiag snapshot' on 2026-11-29."""
    topo = from_root(open_snapshot(H200))
    (gpu,) = topo.by_role(Role.GPU)
    assert gpu.bdf == "0000:00:06.0" and gpu.label == "GPU0" and gpu.model == "NVIDIA H200"
    assert gpu.parent is None and gpu.fn.host_bridge == "0000:00"
    assert (gpu.fn.link.speed_gts, gpu.fn.link.width, gpu.fn.link.max_speed_gts) == (32.0, 16, 32.0)
    assert gpu.fn.driver == "nvidia"
    assert topo.iommu.mode == "off"
    assert topo.cpu.vendor == "GenuineIntel" and topo.cpu.numa_nodes == [0]
    assert topo.host_bridges["0000:00"].numa_node == 0  # nvidia-smi: NUMA Affinity 0
    (nic,) = topo.by_role(Role.NIC)
    assert nic.label == "eth0" and nic.fn.vendor == 0x1AF4
    (p,) = analyse_all(topo)
    # Both on the root bus of host bridge 0000:00 (Intel 8086:0d57, not on p2pdma.c's whitelist)
    assert p.smi == SmiLevel.PHB and p.nccl == NcclLevel.PHB
    assert p.path == ["0000:00:06.0", "host-bridge 0000:00", "0000:00:03.0"]
    assert p.p2pdma == P2pDmaMap.NOT_SUPPORTED and p.verdict == P2pVerdict.NO
    assert abs(p.narrowest.link.gbytes_per_s - 63.015) < 0.01 or p.narrowest.bdf == "0000:00:03.0"


def test_snapshot_roundtrip_of_this_machine(tmp_path):
    if not os.path.isdir("/sys/bus/pci/devices"):
        pytest.skip("no /sys/bus/pci on this machine")
    out = tmp_path / "node.tar.gz"
    info = create(str(out))
    assert info["entries"] > 10
    with pytest.raises(Exception, match="exists"):
        create(str(out))  # never overwrite
    snap = from_root(open_snapshot(str(out)))
    live = from_root("/")
    assert sorted(snap.devices) == sorted(live.devices)
    for bdf in live.devices:
        a, b = live.devices[bdf], snap.devices[bdf]
        assert (a.role, a.fn.class_code, a.fn.vendor, a.fn.device, a.names, a.fn.parent_bdf) == (
            b.role,
            b.fn.class_code,
            b.fn.vendor,
            b.fn.device,
            b.names,
            b.fn.parent_bdf,
        )
    assert snap.iommu.mode == live.iommu.mode


def test_fsroot_reroots_absolute_links(tmp_path):
    (tmp_path / "sys/devices/pci0000:00/0000:00:01.0").mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("/sys/devices/pci0000:00/0000:00:01.0", tmp_path / "sys/bus/pci/devices/0000:00:01.0")
    fs = FsRoot(str(tmp_path))
    assert fs.resolve("/sys/bus/pci/devices/0000:00:01.0") == "/sys/devices/pci0000:00/0000:00:01.0"
    os.symlink("loop", tmp_path / "loop")
    with pytest.raises(OSError):
        fs.resolve("/loop/x")


def test_malformed_sysfs_values_do_not_crash(tmp_path):
    d = tmp_path / "sys/devices/pci0000:00/0000:00:02.0"
    d.mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:02.0", tmp_path / "sys/bus/pci/devices/0000:00:02.0")
    (d / "class").write_text("garbage\n")
    (d / "vendor").write_text("0x10de\n")
    (d / "numa_node").write_text("-1\n")
    (d / "current_link_speed").write_text("Unknown\n")
    (d / "config").write_bytes(b"\xde\x10\x33")
    topo = from_root(str(tmp_path))
    dev = topo.devices["0000:00:02.0"]
    assert dev.fn.class_code is None and dev.fn.numa_node is None and dev.fn.link.speed_gts is None
    assert any("not an integer" in p for p in topo.problems)
    assert dev.fn.config.problems == ["config space truncated (3 bytes, need at least 64)"]


def test_udev_enrichment_agrees_with_sysfs():
    pytest.importorskip("pyudev")
    from gdsdiag.topology.udev_names import enrich

    topo = from_root("/")
    notes = enrich(topo)
    assert not [n for n in notes if "differs" in n]  # udev's PCI_ID equals what sysfs says
    # a corrupted sysfs reading is caught by the comparison
    if topo.devices:
        d = next(iter(topo.devices.values()))
        d.fn.device ^= 0x1
        assert any(d.bdf in n and "differs" in n for n in enrich(topo))
