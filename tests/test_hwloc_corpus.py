"""hwloc's own real /sys snapshots: every PCI function, class, id, parent bridge, link speed and
(where hwloc was not told to override locality) NUMA placement must agree with hwloc's expected
output (.xml for --whole-io runs, .console for the default-filtered run)."""

import re
import xml.etree.ElementTree as ET

import pytest
from conftest import corpus

from gdsdiag.topology.load import from_root
from gdsdiag.topology.model import Role

XML_CASES = {
    "32em64t-2n8c+dax+nvme+mic+dimms": "32em64t-2n8c+dax+nvme+mic+dimms.xml",
    "40intel64-2g2n4c+pcilocality": "40intel64-2g2n4c+pcilocality.xml",
    "fakepcilocalities": "fakepcilocalities.xml",
}
# These two .test files set HWLOC_PCI_LOCALITY, so hwloc's placement is not the sysfs NUMA node.
LOCALITY_OVERRIDDEN = {"40intel64-2g2n4c+pcilocality", "fakepcilocalities"}


def hwloc_pci(xml_path):
    """busid -> (pci_type fields, parent busid or None, link GB/s, NUMA os_index or None)."""
    root = ET.parse(xml_path).getroot()
    out = {}

    def walk(node, parent_busid, numa):
        for child in node.findall("object"):
            t = child.get("type")
            n = numa
            if t == "Package":
                nn = child.find("object[@type='NUMANode']")
                n = int(nn.get("os_index")) if nn is not None else None
            busid = child.get("pci_busid")
            if busid:
                out[busid] = (child.get("pci_type"), parent_busid, float(child.get("pci_link_speed", "0")), numa)
                walk(child, busid, n)
            else:
                walk(child, parent_busid, n)

    walk(root.find("object"), None, None)
    return out


@pytest.mark.parametrize("name", sorted(XML_CASES))
def test_pci_tree_matches_hwloc_xml(name, hwloc_trees):
    expected = hwloc_pci(corpus("hwloc-sysfs", XML_CASES[name]))
    topo = from_root(hwloc_trees[name])
    ours = dict(topo.devices)
    if name.startswith("32em64t"):
        # 00:11.0 is a bridge whose captured config space says secondary=subordinate=00 (an
        # unconfigured range). hwloc leaves such a bridge out; we keep every function sysfs lists.
        odd = ours.pop("0000:00:11.0")
        assert odd.fn.secondary_bus == 0 and odd.is_bridge
    assert set(ours) == set(expected), set(ours) ^ set(expected)
    numa_checked = 0
    for bdf, (pci_type, parent, speed, numa) in expected.items():
        d = ours[bdf]
        m = re.match(
            r"^([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\] \[([0-9a-f]{4}):([0-9a-f]{4})\] ([0-9a-f]{2})", pci_type
        )
        cls, ven, dev, sven, sdev, rev = (int(x, 16) for x in m.groups())
        fn = d.fn
        assert fn.class_code >> 8 == cls, bdf
        assert (fn.vendor, fn.device) == (ven, dev), bdf
        assert (fn.subsystem_vendor or 0, fn.subsystem_device or 0) == (sven, sdev), bdf
        assert fn.revision == rev, bdf
        assert (d.parent.bdf if d.parent else None) == parent, bdf
        assert abs((fn.link.gbytes_per_s or 0.0) - speed) < 1e-5, bdf
        if name not in LOCALITY_OVERRIDDEN and numa is not None:
            assert topo.numa_of(d) == numa, bdf
            numa_checked += 1
    if name not in LOCALITY_OVERRIDDEN:
        assert numa_checked == 44  # every device hwloc placed under a package


def test_console_case_matches(hwloc_trees):
    text = open(corpus("hwloc-sysfs", "40intel64-4n10c+pci-conflicts.console")).read()
    topo = from_root(hwloc_trees["40intel64-4n10c+pci-conflicts"])
    listed = re.findall(r"busid=(\S+) id=([0-9a-f]{4}):([0-9a-f]{4}) class=([0-9a-f]{4})", text)
    assert len(listed) == 2
    for busid, ven, dev, cls in listed:
        fn = topo.devices[busid].fn
        assert (fn.vendor, fn.device, fn.class_code >> 8) == (int(ven, 16), int(dev, 16), int(cls, 16))
    assert topo.devices["0000:01:00.0"].parent.bdf == "0000:00:03.0"


def test_odd_names_in_sysfs_are_ignored(hwloc_trees):
    # 40intel64 carries '0000:00:03.0:pcieffffffc1', a port-service child, next to real functions
    topo = from_root(hwloc_trees["40intel64-2g2n4c+pcilocality"])
    assert all(re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", b) for b in topo.devices)


# --- round 2 (hwloc-sysfs/SOURCES-round2.md): snapshots from hwloc's history, hwloc 1.x expected ---
# '.output' is 'lstopo -v --of xml --whole-io': every function. hwloc 1.x writes pci_link_speed 0 for
# every function of these trees (their config files are 64 bytes, the kernels have no current_link_*
# files): 0 there means "not known", and gdsdiag must say unknown too.
ROUND2_XML = {
    # name: (functions, NUMA placements hwloc makes on one node, locality overridden by the .env)
    "24em64t-2n6c2t+2mic.olddriver": (45, 0, False),  # numa_node -1, local_cpus all: machine-wide
    "32em64t-2n8c+1mic": (137, 45, False),
    "40intel64-2g2n4c+pci": (37, 0, True),  # .env: HWLOC_PCI_0000_{00,40}_LOCALCPUS
}
# hwloc OS device types (1.x): 0 block, 2 network, 3 openfabrics
_OSDEV_BLOCK, _OSDEV_NET, _OSDEV_OFED = "0", "2", "3"


def hwloc1_pci(xml_path):
    """busid -> (pci_type, parent busid, link GB/s, NUMA node or None, OS device names by type)."""
    root = ET.parse(xml_path).getroot()
    out = {}

    def single_node(mask):
        v = int(mask.replace(",", "").replace("0x", ""), 16)
        return v.bit_length() - 1 if v and v & (v - 1) == 0 else None

    def walk(node, parent_busid, numa):
        for child in node.findall("object"):
            n = single_node(child.get("nodeset")) if child.get("nodeset") else numa
            busid = child.get("pci_busid")
            if busid:
                osdevs = [(o.get("osdev_type"), o.get("name")) for o in child.findall("object[@type='OSDev']")]
                out[busid] = (child.get("pci_type"), parent_busid, float(child.get("pci_link_speed")), numa, osdevs)
                walk(child, busid, n)
            else:
                walk(child, parent_busid, n)

    walk(root.find("object"), None, None)
    return out


@pytest.mark.parametrize("name", sorted(ROUND2_XML))
def test_round2_pci_tree_matches_hwloc1_xml(name, hwloc_trees):
    count, numa_expected, overridden = ROUND2_XML[name]
    expected = hwloc1_pci(corpus("hwloc-sysfs", name + ".output"))
    topo = from_root(hwloc_trees[name])
    assert len(expected) == len(topo.devices) == count
    assert set(topo.devices) == set(expected), set(topo.devices) ^ set(expected)
    numa_checked = 0
    for bdf, (pci_type, parent, speed, numa, osdevs) in expected.items():
        d = topo.devices[bdf]
        fn = d.fn
        m = re.match(
            r"^([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\] \[([0-9a-f]{4}):([0-9a-f]{4})\] ([0-9a-f]{2})", pci_type
        )
        cls, ven, dev, sven, sdev, rev = (int(x, 16) for x in m.groups())
        assert (fn.class_code >> 8, fn.vendor, fn.device) == (cls, ven, dev), bdf
        assert (fn.subsystem_vendor or 0, fn.subsystem_device or 0, fn.revision) == (sven, sdev, rev), bdf
        assert (d.parent.bdf if d.parent else None) == parent, bdf
        assert speed == 0.0 and fn.config_size == 64 and fn.link.gbytes_per_s is None, bdf
        if not overridden:
            assert topo.numa_of(d) == numa, bdf  # None both where hwloc put it at the Machine
            numa_checked += numa is not None
        # the names users know it by: network and InfiniBand devices, NVMe namespaces
        # (and whole disks of other storage functions, sda, as hwloc lists them too: issue 46)
        names = [
            n
            for t, n in osdevs
            if t in (_OSDEV_NET, _OSDEV_OFED) or (t == _OSDEV_BLOCK and n.startswith(("nvme", "sd", "vd", "xvd", "hd")))
        ]
        assert sorted(d.names) == sorted(names), bdf
        if any(t in (_OSDEV_NET, _OSDEV_OFED) for t, _ in osdevs):
            assert d.role == Role.NIC, bdf  # the QLogic qib0 (class 0c06) too
        if any(t == _OSDEV_BLOCK and n.startswith("nvme") for t, n in osdevs):
            assert d.role == Role.NVME, bdf
    assert numa_checked == numa_expected


def test_round2_nvme_namespace_only_in_class_block(hwloc_trees):
    # 32em64t-2n8c+1mic predates /sys/class/nvme: nvme0n1 is only in /sys/class/block, on 0000:00:02.0's
    # path; its 'device' link (copied from another machine) names 0000:01:00.0, absent from the tree
    topo = from_root(hwloc_trees["32em64t-2n8c+1mic"])
    assert topo.devices["0000:00:02.0"].names == ["nvme0n1"] and "0000:01:00.0" not in topo.devices


def test_round2_2019_power9_tree_without_class_files():
    """hwloc's first nvidiagpunumanodes (2019): /sys/bus/pci/devices/* are plain directories holding
    only local_cpus. The 6 GPUs are known from /proc/driver/nvidia/gpus; where they attach is not."""
    from gdsdiag.platform.archroot import ArchiveRoot
    from gdsdiag.topology.pairs import NcclLevel, SmiLevel, analyse_all

    root = ArchiveRoot(corpus("hwloc-sysfs", "4c37b1d086", "nvidiagpunumanodes.tar.bz2"))
    (top,) = root.listdir("/")
    topo = from_root(root.within(top))
    kept = open(corpus("hwloc-sysfs", "4c37b1d086", "nvidiagpunumanodes.kept.output")).read()
    package_node = None
    seen = 0
    for line in kept.splitlines():
        m = re.match(r"^\s*NUMANode L#\d+ \(P#(\d+)", line)
        if m:
            package_node = int(m.group(1))
        m = re.match(r"^\s*NUMANode\(GPUMemory\) L#\d+ \(P#(\d+) .*PCIBusID=(\S+)\)", line)
        if m:
            d = topo.devices[m.group(2)]
            assert d.role == Role.GPU and d.fn.class_code is None  # it was 'other' before
            assert d.fn.gpu_numa_node == int(m.group(1))
            assert topo.numa_of(d) == package_node
            assert d.fn.placement_unknown
            seen += 1
    assert seen == len(topo.devices) == len(topo.by_role(Role.GPU)) == 6
    assert any("are directories, not links into /sys/devices" in p for p in topo.problems)
    assert all(hb.vendor is None for hb in topo.host_bridges.values())  # was the GPU's own 10de
    by = {(p.a.bdf, p.b.bdf): p for p in analyse_all(topo)}
    same_domain = by[("0004:05:00.0", "0004:06:00.0")]
    assert (same_domain.smi, same_domain.nccl) == (SmiLevel.UNKNOWN, NcclLevel.UNKNOWN)
    assert by[("0004:05:00.0", "0006:00:00.0")].smi == SmiLevel.NODE
    assert by[("0004:05:00.0", "0007:00:00.0")].smi == SmiLevel.SYS
