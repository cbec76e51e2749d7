"""Issue 12, sysfs side: real /sys trees from hwloc's Linux test suite (open-mpi/hwloc,
tests/hwloc/linux at commit 3b37b024aa3f, copied verbatim into tests/fixtures/corpus/hwloc-sysfs/
with hwloc's own .test and expected .console output). Each test failed before the fix it covers:

- 2pa-pcidomain32bits: a KVM guest with a 32-bit PCI domain (10000:00:04.0, a virtio disk). Before:
  the two 10000:* functions were dropped without a word.
- 32intel64-2p8co2t+8ve: a Xeon with 8 NEC VectorEngines where bridge 0000:5f:03.0 is on the device
  path of 0000:60:00.0/.1 but absent from /sys/bus/pci/devices. Before: both Ethernet functions hung
  under the host bridge; hwloc (and now gdsdiag) put them under 0000:5e:00.0.
- nvidiagpunumanodes: a POWER9 (PowerNV 8335-GTW) with 6 V100 whose memory is NUMA nodes 250-255;
  no numa_node files, only local_cpus. Before: NUMA None for every GPU, the GPUs were role 'other'
  (no vendor file) and the 6 memory-only nodes counted as CPU nodes.
"""

import re

from conftest import corpus

from gdsdiag.topology.load import from_root
from gdsdiag.topology.model import Role
from gdsdiag.topology.pairs import NcclLevel, SmiLevel, analyse_all


def console_tree(name):
    """hwloc .console -> {busid: (parent busid or None, host bridge line, Package NUMA P#)}."""
    out = {}
    stack = []  # (indent, busid)
    numa = None
    for line in open(corpus("hwloc-sysfs", name + ".console")):
        indent = len(line) - len(line.lstrip())
        s = line.strip()
        if s.startswith("Package "):
            numa = None
        m = re.match(r"^NUMANode L#\d+ \(P#(\d+)", s)
        if m and numa is None:
            numa = int(m.group(1))
        if s.startswith("HostBridge"):
            stack = []
            continue
        m = re.match(r"^(?:PCIBridge|PCI) L#\d+ \(busid=(\S+)", s)
        if not m:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        out[m.group(1)] = (stack[-1][1] if stack else None, numa)
        stack.append((indent, m.group(1)))
    return out


def test_32bit_pci_domain_is_read(hwloc_trees):
    topo = from_root(hwloc_trees["2pa-pcidomain32bits"])
    expected = console_tree("2pa-pcidomain32bits")
    assert "10000:00:04.0" in expected
    for busid in expected:
        assert busid in topo.devices, busid
    disk = topo.devices["10000:00:04.0"]
    assert disk.fn.host_bridge == "10000:00"
    assert (disk.fn.vendor, disk.fn.device, disk.fn.class_code >> 8) == (0x1AF4, 0x1001, 0x0100)
    assert disk.fn.domain == "10000" and disk.fn.bus == 0
    assert "10000:00" in topo.host_bridges
    assert not [p for p in topo.problems if "10000" in p]


def test_hidden_parent_bridge_hangs_under_nearest_listed_ancestor(hwloc_trees):
    topo = from_root(hwloc_trees["32intel64-2p8co2t+8ve"])
    expected = console_tree("32intel64-2p8co2t+8ve")
    assert expected["0000:60:00.0"][0] == "0000:5e:00.0"
    for busid, (parent, _) in expected.items():
        d = topo.devices[busid]
        assert (d.parent.bdf if d.parent else None) == parent, busid
    # the move is reported, not silent
    assert any("0000:60:00.0" in p and "0000:5f:03.0" in p and "0000:5e:00.0" in p for p in topo.problems)
    # and the two ports of the NIC are PIX to each other only through the real bridge
    eth0, eth1 = topo.devices["0000:60:00.0"], topo.devices["0000:60:00.1"]
    assert eth0.parent is eth1.parent and eth0.role == Role.NIC


def test_numa_from_local_cpus_and_gpu_memory_nodes(hwloc_trees):
    topo = from_root(hwloc_trees["nvidiagpunumanodes"])
    expected = console_tree("nvidiagpunumanodes")
    gpus = topo.by_role(Role.GPU)
    assert len(gpus) == 6 == len(expected)
    for busid, (_, numa) in expected.items():
        d = topo.devices[busid]
        assert d.fn.numa_node == numa and d.fn.numa_source == "local_cpus", busid
        assert topo.numa_of(d) == numa, busid
    # hwloc's -kept run attaches each GPUMemory node to its GPU by PCIBusID
    kept = open(corpus("hwloc-sysfs", "nvidiagpunumanodes-kept.console")).read()
    pairs = re.findall(r"NUMANode\(GPUMemory\) L#\d+ \(P#(\d+) .*PCIBusID=(\S+)\)", kept)
    assert len(pairs) == 6
    for node, busid in pairs:
        assert topo.devices[busid].fn.gpu_numa_node == int(node)
    assert topo.cpu.cpu_nodes == [0, 8]
    assert topo.cpu.memory_only_nodes == [250, 251, 252, 253, 254, 255]
    # The tree's /sys/bus/pci/devices entries are directories, not links into /sys/devices: nothing
    # says what is above each GPU. Two buses of one PCI domain (0004:05, 0004:06; on POWER one PHB per
    # domain, root bus 00) may share a switch or a host bridge: unknown, not NODE (it said NODE
    # before). GPUs in different domains share nothing PCI, so NUMA decides: node 0 and node 0 is
    # NODE, node 0 and node 8 is SYS.
    assert len(topo.problems) == 6 + 1 and "are directories, not links into /sys/devices" in topo.problems[-1]
    by = {(p.a.bdf, p.b.bdf): p for p in analyse_all(topo)}
    assert by[("0004:05:00.0", "0004:06:00.0")].smi == SmiLevel.UNKNOWN
    assert by[("0004:05:00.0", "0004:06:00.0")].nccl == NcclLevel.UNKNOWN
    assert by[("0004:05:00.0", "0006:00:00.0")].smi == SmiLevel.NODE
    assert by[("0004:05:00.0", "0035:05:00.0")].smi == SmiLevel.SYS
    assert all(hb.vendor is None for hb in topo.host_bridges.values())  # no GPU taken for a host bridge


def test_matrix_shows_cpu_numa_and_gpu_numa_id_columns(hwloc_trees):
    # hwloc's tree is read straight from its archive (no directory to pass to --root): render the
    # matrix in-process, as 'gdsdiag topology --matrix' does through a pipe (400 columns)
    import io

    from rich.console import Console

    from gdsdiag.render.topology_text import render
    from gdsdiag.topology.findings import find

    topo = from_root(hwloc_trees["nvidiagpunumanodes"])
    pairs = analyse_all(topo)
    buf = io.StringIO()
    render(
        Console(file=buf, width=400),
        topo,
        pairs,
        find(topo, pairs),
        show_tree=False,
        show_matrix=True,
        show_findings=False,
    )
    out = buf.getvalue()
    lines = out.splitlines()
    head = next(ln for ln in lines if "GPU NUMA ID" in ln)
    assert head.split()[-7:] == ["CPU", "Affinity", "NUMA", "Affinity", "GPU", "NUMA", "ID"]
    row0 = next(ln for ln in lines if ln.split()[:2] == ["GPU0", "X"]).split()
    assert row0[-3:] == ["0-87", "0", "255"]  # node0's cpulist, node 0, memory node 255 (0004:05:00.0)
    row5 = next(ln for ln in lines if ln.split()[:1] == ["GPU5"]).split()
    assert row5[-3:] == ["88-175", "8", "250"]
    assert "no NVLink source" in out


def test_inactive_nvlinks_from_nvlink_status_text_become_a_finding(hwloc_trees):
    # the POWER9 + V100-SXM2 tree, with a V100-SXM2's real 'nvidia-smi nvlink -s' (Azure/azhpc-diagnostics#73:
    # GPU 3 with links 3 and 5 <inactive>); before, nothing read that text at all
    from gdsdiag.topology.findings import find
    from gdsdiag.topology.load import attach_nvlink_status

    topo = from_root(hwloc_trees["nvidiagpunumanodes"])
    text = open(corpus("nvidia-smi-nvlink", "azhpc-v100-sxm2-two-links-inactive.txt")).read()
    attach_nvlink_status(topo, text, "nvidia-smi nvlink -s (azhpc#73)")
    gpu3 = next(d for d in topo.by_role(Role.GPU) if d.label == "GPU3")
    g = topo.nvlink.gpus[gpu3.bdf]
    assert (g.links_active, g.links_inactive) == (4, 2)
    (f,) = [f for f in find(topo, analyse_all(topo)) if f.id.startswith("nvlink-inactive")]
    assert f.id == f"nvlink-inactive:{gpu3.bdf}" and f.severity == "warn"
    assert "2 NVLink(s) inactive, 4 active" in f.title
