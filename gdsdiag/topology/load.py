"""Entry points that turn a root directory, a snapshot or lspci texts into a ``Topology``."""

from __future__ import annotations

import re

from ..bounded import read_user_text  # regular files under a stated size only
from ..errors import GdsdiagError, UsageError
from ..importers import lspci
from ..pci.config_space import AcsControl
from ..pci.records import CpuInfo, HostBridge, IommuInfo, PciFunction
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
    from ..pci.nvlink import NvLinkInfo
    from .nvlink import apply_link_status

    gpus = parse_nvlink_status(text)
    if not gpus:
        return
    if topo.nvlink is None:
        topo.nvlink = NvLinkInfo(source=source)
    apply_link_status(topo, topo.nvlink, gpus, source)


def attach_smi_text(topo: Topology, text: str, source: str) -> None:
    from ..importers.nvidia_smi import parse
    from ..pci.nvlink import NvLinkInfo
    from .nvlink import from_smi_matrix

    try:
        m = parse(text)
    except GdsdiagError as e:
        topo.nvlink_note = f"{source}: {e.cause}"
        return
    topo.nvlink = from_smi_matrix(topo, m, source) or NvLinkInfo(source=source)
    topo.nvlink_note = ""


def _parse_numa_map(spec: str | None) -> list[tuple[str, int, int, int]]:
    """'0000:00=0,0000:80-ff=1' → [(domain, bus_lo, bus_hi, node)]."""
    out = []
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        # the node in ASCII digits, below Linux's node limit ('²', '١' and 5,000 digits are not nodes)
        m = re.match(r"^\s*([0-9a-f]{4}):([0-9a-f]{2})(?:-([0-9a-f]{2}))?\s*=\s*([0-9]{1,4})\s*$", part, re.I)
        if not m:
            raise UsageError(f"bad --numa entry {part!r}", "use DOMAIN:BUS[-BUS]=NODE, e.g. 0000:00-7f=0,0000:80-ff=1")
        lo = int(m.group(2), 16)
        out.append((m.group(1).lower(), lo, int(m.group(3), 16) if m.group(3) else lo, int(m.group(4))))
    return out


def from_lspci(paths, numa_spec: str | None = None) -> Topology:
    """The topology that lspci texts describe (``topology --lspci``): ``-tv`` trees, ``-vvv`` device
    blocks and ``grep ACSCtl`` pastes, merged; ``numa_spec`` (``--numa``) places host bridges on nodes."""
    tree_fns: list[PciFunction] = []
    details: dict[str, PciFunction] = {}
    problems: list[str] = []
    greps: list[tuple[str, list[AcsControl | None]]] = []
    unnamed: list[tuple[str, list[AcsControl | None]]] = []  # ACSCtl lines whose device header was cut off
    for p in paths:
        text = lspci.dedent_paste(read_user_text(p, "lspci output"))
        tree = []
        if re.search(r"^[ |+\\-]*\[[0-9a-f]{4,8}:[0-9a-f]{2}\]-", text, re.M):
            tree = lspci.parse_tree(text)
            tree_fns += tree
        blocks = lspci.parse_vvv(text)
        details.update(blocks)
        grep = not blocks and not tree and "ACSCtl:" in text
        if grep:
            greps.append((p, lspci.acsctl_lines(text)))
        headless = lspci.headless_acsctl_lines(text) if blocks else []
        if headless:
            unnamed.append((p, headless))
        problems += lspci.unread_lines(p, text, "tree" if tree else "vvv" if blocks else "grep" if grep else "none")
    if not tree_fns and not details and not greps:
        raise GdsdiagError("no lspci tree or device blocks found", "send 'lspci -tv' and 'sudo lspci -vvvxxxx' output")
    if tree_fns and not any(f.name for f in tree_fns) and not details:
        problems.append(
            "lspci -t without -v: the tree names no device, so no GPU, NVMe or NIC can be recognised "
            "(send 'lspci -tv', or add plain 'lspci' output for the names)"
        )
    functions = lspci.merge_functions(tree_fns, details)
    orphans = [f.bdf for f in functions if f.placement_unknown]
    if orphans:
        problems.append(
            f"placement not known for {', '.join(orphans[:4])}{f' and {len(orphans) - 4} more' if len(orphans) > 4 else ''}:"
            " no upstream bridge in the text, no root port on the bus (add 'lspci -tv')"
        )
    grep_notes, grep_problems = _apply_acs_grep(functions, greps) if functions else ([], [])
    problems += grep_problems
    numa = _parse_numa_map(numa_spec)
    host_bridges: dict[str, HostBridge] = {}
    for fn in functions:
        hb = host_bridges.setdefault(fn.host_bridge, HostBridge(id=fn.host_bridge))
        dom, bus = fn.host_bridge.split(":")
        for d, lo, hi, node in numa:
            if d == dom and lo <= int(bus, 16) <= hi:
                hb.numa_node = node
        if hb.numa_node is None and fn.numa_node is not None:
            hb.numa_node = fn.numa_node
        if fn.bdf == f"{fn.host_bridge}:00.0":
            hb.vendor, hb.device = fn.vendor, fn.device
            if fn.name:
                hb.vendor_name = fn.name
    topo = build(
        functions,
        host_bridges,
        IommuInfo(mode="unknown", evidence=["lspci text carries no IOMMU state"]),
        CpuInfo(),
        source=", ".join(paths),
    )
    topo.origin = "lspci"
    topo.notes += grep_notes
    topo.problems += problems
    if not tree_fns and not details:
        # only 'grep ACSCtl' pastes (what forum threads hold): no device, but the ACS settings
        # themselves are judged (topology.findings: acs-grep)
        topo.acs_grep = [_grep_summary(path, lines) for path, lines in greps]
    # ACSCtl lines above the first header of a '-vvv' excerpt: judged like a grep's (a redirect is a
    # redirect, whichever port it is on); the lines themselves are also listed as not read
    topo.acs_grep += [_grep_summary(path, lines, unnamed=True) for path, lines in unnamed]
    return topo


def _grep_summary(path: str, lines: list[AcsControl | None], unnamed: bool = False) -> dict:
    parsed = [a for a in lines if a is not None]
    return {
        "path": path,
        "headless": unnamed,
        "lines": len(lines),
        "unreadable": len(lines) - len(parsed),
        "redirect": sum(1 for a in parsed if a.redirects),
        "settings": sorted({a.flags() for a in parsed}),
    }


def _apply_acs_grep(functions: list[PciFunction], greps) -> tuple[list[str], list[str]]:
    """'lspci -vvv | grep ACSCtl' names no device, but it lists every ACS-capable function (lspci
    prints ACSCtl only as root, so the list is complete). When every line is the same setting, every
    bridge either has ACS set that way or has no ACS: for P2P the redirect question is answered.
    Otherwise the lines cannot be attributed, and that is said. Returns (notes, problems)."""
    notes: list[str] = []
    out: list[str] = []
    for path, lines in greps:
        parsed = [a for a in lines if a is not None]
        bridges = [f for f in functions if f.secondary_bus is not None or (f.class_code or 0) >> 8 == 0x0604]
        unknown = [
            f
            for f in bridges
            if f.acs_text is None and not f.acs_absent and not (f.config and f.config.has_acs is not None)
        ]
        if parsed and len(parsed) == len(lines) and len({a.flags() for a in parsed}) == 1:
            for f in unknown:
                f.acs_text = parsed[0]
            notes.append(
                f"{path}: all {len(parsed)} ACSCtl lines read '{parsed[0].flags()}'; applied to the "
                f"{len(unknown)} bridges whose ACS was unknown (a bridge without ACS behaves the same for P2P)"
            )
        else:
            redirect = sum(1 for a in parsed if a.redirects)
            out.append(
                f"{path}: {len(lines)} ACSCtl lines without device addresses and not all alike "
                f"({redirect} with redirect); they cannot be attributed to bridges — send the full "
                "'sudo lspci -vvv' instead of the grep"
            )
    return notes, out
