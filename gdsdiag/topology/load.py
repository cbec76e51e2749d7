"""Entry points that turn a root directory or a snapshot into a ``Topology``."""

from __future__ import annotations

from ..platform import pci_sysfs
from ..platform.fsroot import FsRoot
from .build import build
from .model import Topology


def from_root(root: str | FsRoot = "/") -> Topology:
    """The topology under ``root``: a path, or an ``FsRoot`` already open (``check`` passes its
    own, so the problems both readers meet land in one list)."""
    fs = root if isinstance(root, FsRoot) else FsRoot(root)
    cpu = pci_sysfs.read_cpu(fs)
    nvidia = {b.lower() for b in fs.listdir("/proc/driver/nvidia/gpus")}
    functions, host_bridges = pci_sysfs.read_functions(
        fs, {n: c for n, c in cpu.node_cpus.items() if n in cpu.cpu_nodes}, nvidia
    )
    for node, bdf in cpu.gpu_memory_nodes.items():
        for fn in functions:
            if fn.bdf == bdf:
                fn.gpu_numa_node = node
    topo = build(
        functions,
        host_bridges,
        pci_sysfs.read_iommu(fs),
        cpu,
        names=pci_sysfs.read_names(fs),
        gpu_minors=pci_sysfs.read_nvidia_minors(fs),
        models=pci_sysfs.read_nvidia_models(fs),
        source=fs.root,
    )
    # numa_node reads -1 on machines without an ACPI proximity domain for the bus (VMs, single
    # socket boards); with one NUMA node there is only one answer, the one nvidia-smi prints too.
    if topo.cpu.cpu_nodes == [0]:
        for hb in topo.host_bridges.values():
            if hb.numa_node is None:
                hb.numa_node = 0
    # Unreadable config files are expected without root; report them once, not per device.
    denied = [p for p in fs.problems if p.endswith("/config: Permission denied")]
    topo.problems += [p for p in fs.problems if p not in denied and p not in topo.problems]
    if denied:
        topo.problems.append(f"{len(denied)} config files unreadable (permission denied)")
    attach_nvlink(topo, fs)
    return topo


# Where a snapshot keeps the 'nvidia-smi topo -m' and 'nvidia-smi nvlink -s' it captured (the support
# bundle's files).
SNAPSHOT_SMI_TOPO = ("/gdsdiag/nvidia-smi-topo-m.txt", "/gdsdiag/nvidia-smi/topo-m.txt")
SNAPSHOT_SMI_NVLINK = ("/gdsdiag/nvidia-smi-nvlink-s.txt", "/gdsdiag/nvidia-smi/nvlink-s.txt")


def attach_nvlink(topo: Topology, fs: FsRoot) -> None:
    """NVLink per GPU pair: NVML on a live node, the captured nvidia-smi text in a snapshot."""
    from ..topology.model import Role

    if not topo.by_role(Role.GPU):
        return
    if fs.is_live:
        from ..platform.nvlink_nvml import read_nvml

        info, why = read_nvml()
        topo.nvlink = info
        topo.nvlink_note = why
        return
    for path in SNAPSHOT_SMI_TOPO:
        text = fs.read_text(path)
        if text:
            attach_smi_text(topo, text, f"nvidia-smi topo -m in the snapshot ({path})")
            break
    else:
        topo.nvlink_note = "no NVLink source in this tree (NVML is live-only; no captured nvidia-smi topo -m)"
    for path in SNAPSHOT_SMI_NVLINK:
        text = fs.read_text(path)
        if text:
            attach_nvlink_status(topo, text, f"nvidia-smi nvlink -s in the snapshot ({path})")
            break


def attach_nvlink_status(topo: Topology, text: str, source: str) -> None:
    """Link states (active / <inactive>) per GPU from 'nvidia-smi nvlink -s' text."""
    from ..importers.nvidia_smi import parse_nvlink_status
    from .nvlink import NvLinkInfo, apply_link_status

    gpus = parse_nvlink_status(text)
    if not gpus:
        return
    if topo.nvlink is None:
        topo.nvlink = NvLinkInfo(source=source)
    apply_link_status(topo, topo.nvlink, gpus, source)


def attach_smi_text(topo: Topology, text: str, source: str) -> None:
    from ..errors import GdsdiagError
    from ..importers.nvidia_smi import parse
    from .nvlink import NvLinkInfo, from_smi_matrix

    try:
        m = parse(text)
    except GdsdiagError as e:
        topo.nvlink_note = f"{source}: {e.cause}"
        return
    topo.nvlink = from_smi_matrix(topo, m, source) or NvLinkInfo(source=source)
    topo.nvlink_note = ""
