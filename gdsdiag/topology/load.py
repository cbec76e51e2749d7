"""Entry points that turn a root directory or a snapshot into a ``Topology``."""
from __future__ import annotations

from ..platform import pci_sysfs
from ..platform.fsroot import FsRoot
from .build import build
from .model import Topology


def from_root(root: "str | FsRoot" = "/") -> Topology:
    fs = root if isinstance(root, FsRoot) else FsRoot(root)
    functions, host_bridges = pci_sysfs.read_functions(fs)
    topo = build(functions, host_bridges, pci_sysfs.read_iommu(fs), pci_sysfs.read_cpu(fs),
                 names=pci_sysfs.read_names(fs), gpu_minors=pci_sysfs.read_nvidia_minors(fs),
                 models=pci_sysfs.read_nvidia_models(fs), source=fs.root)
    # numa_node reads -1 on machines without an ACPI proximity domain for the bus (VMs, single
    # socket boards); with one NUMA node there is only one answer, the one nvidia-smi prints too.
    if topo.cpu.numa_nodes == [0]:
        for hb in topo.host_bridges.values():
            if hb.numa_node is None:
                hb.numa_node = 0
    # Unreadable config files are expected without root; report them once, not per device.
    denied = [p for p in fs.problems if p.endswith("/config: Permission denied")]
    topo.problems += [p for p in fs.problems if p not in denied]
    if denied:
        topo.problems.append(f"{len(denied)} config files unreadable (permission denied)")
    return topo
